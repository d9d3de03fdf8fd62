"""Episode records as the trainer writes them (`trainer/episode_log.py`), for each workflow:
voting (voters → aggregator), evaluator-optimizer (generator ⇄ evaluator rounds),
orchestrator-workers and single, with the scores the rollout gives each role's turns; and the
episode pages' test helpers (a signed-in GET, an accuracy curve, a probe problem's samples)."""

from __future__ import annotations

from typing import Any

from webapp.metrics import write_points


def turn(role, agent, stage, completion, *, score=None, advantage=0.0, reward=0.0, **extra):
    return {
        "role": role,
        "agent": agent,
        "policy": extra.pop("policy", "shared"),
        "stage": stage,
        "prompt": extra.pop("prompt", f"Q: problem for {agent}\nA:"),
        "completion": completion,
        "prompt_tokens": 9,
        "completion_tokens": max(len(completion) // 4, 1),
        "logprob_mean": -0.42,
        "reward": reward,
        "advantage": advantage,
        "score": score,
        "truncated": extra.pop("truncated", False),
        **extra,
    }


def episode(kind, step, index, problem, sample, turns, *, correct, answer="", **extra) -> dict:
    return {
        "kind": kind,
        "step": step,
        "index": index,
        "problem_id": problem,
        "sample": sample,
        "answer": answer,
        "reward": float(correct),
        "correct": correct,
        "malformed": extra.pop("malformed", {}),
        "turns": turns,
        **extra,
    }


def voting(
    kind="train",
    step=1,
    index=0,
    problem="p0",
    sample=0,
    *,
    voters=(1, 1, 0),
    correct=True,
    text="\\boxed{4}",
    **extra,
) -> dict[str, Any]:
    """Voters right or wrong as `voters` says, then the aggregator (right iff `correct`)."""
    adv = 0.5 if correct else -0.5
    turns = [
        turn(
            "generator",
            f"generator{i}",
            0,
            text if ok else "\\boxed{5}",
            score=float(ok),
            advantage=adv,
            reward=float(correct),
        )
        for i, ok in enumerate(voters)
    ]
    turns.append(
        turn(
            "aggregator",
            "aggregator",
            1,
            text if correct else "\\boxed{5}",
            score=float(correct),
            advantage=adv,
            reward=float(correct),
        )
    )
    return episode(
        kind,
        step,
        index,
        problem,
        sample,
        turns,
        correct=correct,
        answer=text if correct else "\\boxed{5}",
        **extra,
    )


def eval_opt(
    kind="train",
    step=1,
    index=0,
    problem="p0",
    sample=0,
    *,
    rounds=((False, False),),
    final_correct=None,
    **extra,
) -> dict[str, Any]:
    """Rounds of (proposal right, verdict accepted); the evaluator's score is whether its
    verdict was right (accepted == proposal right), as the rollout scores it."""
    turns, stage, right = [], 0, False
    for right, accepted in rounds:
        turns.append(
            turn(
                "generator",
                "generator",
                stage,
                "\\boxed{4}" if right else "\\boxed{5}",
                score=float(right),
            )
        )
        stage += 1
        turns.append(
            turn(
                "evaluator",
                "evaluator",
                stage,
                "yes" if accepted else "no",
                score=float(accepted == right),
            )
        )
        stage += 1
    correct = right if final_correct is None else final_correct
    return episode(kind, step, index, problem, sample, turns, correct=correct, **extra)


def orch_workers(
    kind="train", step=1, index=0, problem="p0", sample=0, *, workers=2, correct=True, **extra
) -> dict[str, Any]:
    turns = [turn("orchestrator", "orchestrator", 0, "add;check")]
    turns += [turn("worker", f"worker{i}", 1, f"part {i} done") for i in range(workers)]
    turns.append(turn("synthesizer", "synthesizer", 2, "\\boxed{4}", score=float(correct)))
    malformed = {} if workers else {"no_subtasks": 1}
    return episode(
        kind, step, index, problem, sample, turns, correct=correct, malformed=malformed, **extra
    )


def single(
    kind="train",
    step=1,
    index=0,
    problem="p0",
    sample=0,
    *,
    correct=True,
    completion="\\boxed{4}",
    **extra,
) -> dict[str, Any]:
    turns = [turn("solver", "solver", 0, completion, score=float(correct))]
    return episode(
        kind, step, index, problem, sample, turns, correct=correct, answer=completion, **extra
    )


def voting_step(kind="train", step=1, problems=2, group=4) -> list[dict[str, Any]]:
    """A step of `problems` GRPO groups of `group` voting episodes, every other one right."""
    return [
        voting(
            kind,
            step,
            p * group + s,
            f"p{p}",
            s,
            correct=s % 2 == 0,
            voters=(1, 0, 0) if s % 2 else (1, 1, 0),
        )
        for p in range(problems)
        for s in range(group)
    ]


def get(client, user, url, status=200) -> str:
    """The page at `url` as `user`, its status checked."""
    client.force_login(user)
    response = client.get(url)
    assert response.status_code == status, response.content[:500]
    return response.content.decode()


def accuracy(run, values):
    """`values` every 10 steps, with the SE a run logs beside them (the cliff's noise test)."""
    points = [(key, 10 * i, v) for i, v in enumerate(values) for key in ("eval/accuracy",)]
    write_points(run.id, points + [("eval/accuracy_se", 10 * i, 0.02) for i in range(len(values))])


def probe(run, step, right, problem="q7") -> list[dict[str, Any]]:
    """An evaluation's 2 samples of `problem`, `right` of them correct, marked by step."""
    return [
        voting("eval", step, s, problem, s, correct=s < right, text=f"\\boxed{{at {step}}}")
        for s in range(2)
    ]
