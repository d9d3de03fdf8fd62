"""The `vllm` rollout engine: vLLM in its own process and venv, fed the trained weights.

vLLM pins its own torch and an older transformers, so it runs in a virtual environment of
its own (`make vllm-venv` builds `.venv-vllm`; `TROUPE_VLLM_PYTHON` names another Python)
and in a child process, `trainer/engines/vllm_driver.py`, spoken to in JSON lines over its
stdin/stdout: token ids in, token ids and per-token log-probs out.

- LoRA: ONE engine serves every policy's adapter; a stage's requests for several policies go
  out as one mixed batch. After an update each changed adapter is written (peft format, under
  /dev/shm when there is one) and reloaded in place under its fixed adapter id.
- Full fine-tuning: one engine per policy (each a whole model); after an update the policy's
  weights are written and the engine reloads them in place (`reload_weights`), re-dispatching
  the CPU build's tied output layer (see the driver).
- Prefix caching is on (a GRPO group shares its prompt) and emptied after every weight sync.

Every wait has a timeout (`TROUPE_VLLM_START_TIMEOUT`, `TROUPE_VLLM_TIMEOUT` seconds) and
watches the process: a crash or a hang raises `EngineError` with the engine's last log lines.
The child dies with the trainer (PR_SET_PDEATHSIG) and runs in its own process group, which
`close()` ends, so a cancelled or killed run leaves no process behind.
"""

from __future__ import annotations

import collections
import ctypes
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from pathlib import Path

from trainer.sampling import Sample

REPO = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).resolve().parent / "vllm_driver.py"
# vLLM's CPU attention backend serves only these head sizes (vllm 0.32 cpu_attn.py).
CPU_HEAD_SIZES = (32, 64, 80, 96, 112, 128, 160, 192, 224, 256, 512)
LOG_TAIL_LINES = 30


class EngineError(RuntimeError):
    """The vLLM engine could not start, answer or reload; the message says how to fix it."""


def vllm_python() -> Path:
    """The vLLM venv's interpreter, or an EngineError naming how to build one."""
    named = os.environ.get("TROUPE_VLLM_PYTHON")
    path = Path(named) if named else REPO / ".venv-vllm" / "bin" / "python"
    if not path.exists():
        raise EngineError(
            f"rollout_engine vllm needs vLLM in its own venv, and there is no Python at {path}: "
            "build it with `make vllm-venv` in the Troupe checkout (or set TROUPE_VLLM_PYTHON "
            "to a vLLM venv's python), or use rollout_engine hf"
        )
    return path


def _timeout(name: str, default: float) -> float:
    return float(os.environ.get(name) or default)


def _die_with_parent() -> None:
    """In the child before exec: get SIGKILL when the trainer dies (even by kill -9)."""
    PR_SET_PDEATHSIG = 1
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def check_servable(model_path: str, device: str) -> None:
    """Refuse, before starting anything, a model vLLM's CPU build cannot serve."""
    config = json.loads((Path(model_path) / "config.json").read_text())
    head = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    if device == "cpu" and head not in CPU_HEAD_SIZES:
        raise EngineError(
            f"vLLM's CPU attention cannot serve this model: its head size is {head}, and the "
            f"CPU build supports {', '.join(map(str, CPU_HEAD_SIZES))} (tiny-m has 32, "
            "tiny-s 24): use model tiny-m, or rollout_engine hf"
        )


def _sweep_orphans(root: Path) -> None:
    """Remove the weight folders of trainers that died without closing their engine (a
    worker killed with -9): in /dev/shm they would hold memory until the machine restarts."""
    for folder in root.glob("troupe-vllm-*-*"):
        try:
            pid = int(folder.name.split("-")[2])
            os.kill(pid, 0)
        except ValueError:
            continue
        except ProcessLookupError:
            shutil.rmtree(folder, ignore_errors=True)
        except PermissionError:
            continue  # another user's live process


class Driver:
    """One vLLM process (`vllm_driver.py`) and the JSON-lines conversation with it."""

    def __init__(self, settings: dict, log_path: Path, label: str):
        self.label = label
        self.log_path = log_path
        self._log = open(log_path, "ab")
        env = dict(os.environ)
        # The engine core in this process (one process to watch and to end), not a further
        # child; it is a separate process from the trainer already.
        env["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        env.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")  # GiB of KV cache on the CPU build
        env.pop("PYTHONPATH", None)  # Troupe's packages must not shadow the vLLM venv's
        python = vllm_python()
        try:
            self.process = subprocess.Popen(
                # -P: the driver's folder must not be on sys.path (this module would shadow vllm)
                [str(python), "-P", str(DRIVER), json.dumps(settings)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=self._log,
                env=env,
                cwd=str(log_path.parent),
                preexec_fn=_die_with_parent,
                start_new_session=True,  # its own process group: close() ends all of it
            )
        except OSError as exc:
            self._log.close()
            raise EngineError(
                f"could not run the vLLM venv's Python {python} ({exc}): rebuild it with "
                "`make vllm-venv` (or point TROUPE_VLLM_PYTHON at a working one)"
            ) from exc
        self._replies: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self._replies.put(line)
        self._replies.put(None)  # the pipe closed: the process is gone

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            with open(self.log_path, "rb") as f:
                tail = collections.deque(f, maxlen=lines)
        except OSError:
            return "(no log)"
        return b"".join(tail).decode(errors="replace").rstrip()

    def _fail(self, what: str) -> EngineError:
        self.close(polite=False)  # it failed or hangs: no shutdown request to wait on
        return EngineError(
            f"vLLM engine ({self.label}) {what}; its log ({self.log_path}) ends:\n{self.log_tail()}"
        )

    def send(self, message: dict) -> None:
        try:
            self.process.stdin.write((json.dumps(message) + "\n").encode())
            self.process.stdin.flush()
        except (BrokenPipeError, ValueError, OSError):
            raise self._fail("is gone (it died)") from None

    def receive(self, timeout: float, what: str) -> dict:
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise self._fail(f"did not answer {what} within {timeout:.0f} s")
            try:
                line = self._replies.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if line is None:
                code = self.process.wait(timeout=10)
                raise self._fail(f"exited (code {code}) during {what}")
            reply = json.loads(line)
            if not reply.get("ok"):
                raise self._fail(f"failed {what}: {reply.get('error')}")
            return reply

    def ask(self, message: dict, timeout: float) -> dict:
        self.send(message)
        return self.receive(timeout, message["op"])

    def close(self, polite: bool = True) -> None:
        """Ask it to stop (`polite`), then end its whole process group; idempotent."""
        process = self.process
        if polite and process.poll() is None:
            try:
                process.stdin.write(b'{"op": "shutdown"}\n')
                process.stdin.flush()
                process.wait(timeout=15)
            except (OSError, ValueError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        process.wait()
        if self._log.closed:
            return
        for stream in (process.stdin, process.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self._log.close()


class VllmEngine:
    recomputes_logprobs = True

    def __init__(self, config, policies, model_path: str, device: str, workdir: Path):
        self.config = config
        self.policies = policies
        self.model_path = model_path
        self.device = device
        self.workdir = workdir  # the adapters/weights handed to vLLM, removed by close()
        self.drivers: dict[str, Driver] = {}  # policy -> its driver (LoRA: all the same one)
        self.calls = 0
        self.startup_seconds = 0.0
        self.sync_seconds = 0.0  # the last weight sync
        self._version = 0
        self.log_dir = workdir

    @classmethod
    def start(
        cls, config, policies, model_path: str, on_status=None, log_dir: str | Path | None = None
    ) -> VllmEngine:
        """Start the engine(s) and hand them the policies' current weights. The engines' logs
        go to `log_dir` (default: beside the weights, removed on close)."""
        device = str(policies.device.type)
        check_servable(model_path, device)
        vllm_python()  # a missing venv fails here, before a process is started
        shm = Path("/dev/shm")
        root = shm if shm.is_dir() else Path(tempfile.gettempdir())
        _sweep_orphans(root)
        workdir = Path(tempfile.mkdtemp(prefix=f"troupe-vllm-{os.getpid()}-", dir=root))
        engine = cls(config, policies, model_path, device, workdir)
        engine.log_dir = Path(log_dir) if log_dir else workdir
        started = time.perf_counter()
        if on_status:
            on_status("Starting the vLLM rollout engine")
        try:
            engine._start_drivers()
            engine.policies_changed(list(policies.names))
        except BaseException:
            engine.close()
            raise
        engine.startup_seconds = time.perf_counter() - started
        return engine

    def _settings(self) -> dict:
        model_config = json.loads((Path(self.model_path) / "config.json").read_text())
        settings = {
            "model": self.model_path,
            "seed": self.config.seed,
            "max_model_len": int(
                os.environ.get("TROUPE_VLLM_MAX_MODEL_LEN")
                or min(model_config.get("max_position_embeddings", 4096), 32768)
            ),
            # fp32 on the CPU (as the trainer); bf16 on a GPU, as real models are loaded there
            "dtype": "float32" if self.device == "cpu" else "bfloat16",
        }
        if self.device == "cpu":
            settings["whole_prefills"] = True  # seeded sampling breaks on chunked prefills
            settings["enforce_eager"] = True
        else:
            settings["gpu_memory_utilization"] = float(
                os.environ.get("TROUPE_VLLM_GPU_MEMORY") or 0.3
            )
        if self.config.finetune == "lora":
            settings.update(
                lora=True, max_loras=len(self.policies.names), max_lora_rank=self.config.lora_r
            )
        return settings

    def _start_drivers(self) -> None:
        settings = self._settings()
        timeout = _timeout("TROUPE_VLLM_START_TIMEOUT", 900)
        if self.config.finetune == "lora":
            driver = Driver(settings, self.log_dir / "engine.log", "all policies")
            self.drivers = {name: driver for name in self.policies.names}
        else:  # started together, so their start-ups overlap
            for name in self.policies.names:  # one by one: close() ends those already started
                self.drivers[name] = Driver(settings, self.log_dir / f"engine-{name}.log", name)
        for driver in self._distinct():
            driver.receive(timeout, "start-up")

    def _distinct(self) -> list[Driver]:
        seen: dict[int, Driver] = {}
        for driver in self.drivers.values():
            seen.setdefault(id(driver), driver)
        return list(seen.values())

    def generate(self, policy: str, prompts, *, seeds, max_new_tokens, **kwargs) -> list[Sample]:
        return self.generate_many([(policy, prompts, seeds, max_new_tokens)], **kwargs)[0]

    def generate_many(
        self, jobs, *, temperature: float, eos_ids: list[int], pad_id: int
    ) -> list[list[Sample]]:
        """Each job is (policy, prompts, seeds, budgets); all go out at once, one request per
        engine (LoRA: every policy's rows in one mixed batch), and are answered in order."""
        del pad_id  # vLLM does not pad
        per_driver: dict[int, tuple[Driver, list]] = {}
        for j, (policy, prompts, seeds, budgets) in enumerate(jobs):
            driver = self.drivers[policy]
            rows = per_driver.setdefault(id(driver), (driver, []))[1]
            lora = policy if self.config.finetune == "lora" else None
            for k, (ids, seed, budget) in enumerate(zip(prompts, seeds, budgets)):
                rows.append(
                    (
                        (j, k),
                        {
                            "prompt": list(ids),
                            "seed": int(seed),
                            "max_tokens": int(budget),
                            "lora": lora,
                        },
                    )
                )
        stop = sorted(set(eos_ids))
        for driver, rows in per_driver.values():
            driver.send(
                {
                    "op": "generate",
                    "temperature": float(temperature),
                    "stop": stop,
                    "requests": [r for _, r in rows],
                }
            )
        results: list[list[Sample | None]] = [[None] * len(job[1]) for job in jobs]
        timeout = _timeout("TROUPE_VLLM_TIMEOUT", 3600)
        for driver, rows in per_driver.values():
            reply = driver.receive(timeout, "generate")
            for ((j, k), row), out in zip(rows, reply["results"]):
                results[j][k] = Sample(
                    prompt_ids=row["prompt"],
                    completion_ids=out["ids"],
                    logprobs=out["logprobs"],
                    truncated=out["finish"] != "stop",
                )
            self.calls += 1
        return results

    def policies_changed(self, names: list[str]) -> None:
        """Write the changed policies' weights and have the engine(s) reload them in place."""
        started = time.perf_counter()
        self._version += 1
        version = self.workdir / f"v{self._version}"
        timeout = _timeout("TROUPE_VLLM_TIMEOUT", 3600)
        for name in names:
            if self.config.finetune == "lora":
                # peft writes a non-default adapter into <dir>/<adapter name>/
                self.policies.model.save_pretrained(str(version), selected_adapters=[name])
                path = version / name if (version / name).is_dir() else version
                self.drivers[name].ask(
                    {"op": "load_lora", "name": name, "path": str(path)}, timeout
                )
            else:
                path = version / name
                with self.policies.use(name) as model:
                    model.save_pretrained(str(path))
                self.drivers[name].ask({"op": "reload_weights", "path": str(path)}, timeout)
        # The engine holds the weights now; keep only this version on disk.
        for old in self.workdir.glob("v*"):
            if old != version:
                shutil.rmtree(old, ignore_errors=True)
        self.sync_seconds = time.perf_counter() - started

    def close(self) -> None:
        for driver in self._distinct():
            driver.close()
        self.drivers = {}
        shutil.rmtree(self.workdir, ignore_errors=True)
