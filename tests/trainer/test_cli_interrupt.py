"""What the CLI says when Ctrl-C stops `run`: that the same command resumes only when a
checkpoint is kept; before the first one it starts over, and it says so."""

from trainer.cli import build_parser, interrupted_message


def _args(out):
    return build_parser().parse_args(["run", "--preset", "cpu-demo", "--out", str(out)])


def test_an_interrupt_before_the_first_checkpoint_says_the_run_starts_over(tmp_path):
    message = interrupted_message(_args(tmp_path))

    assert "starts over from step 0" in message and "resume" not in message


def test_an_interrupt_after_a_checkpoint_says_where_the_run_resumes(tmp_path):
    kept = tmp_path / "checkpoints" / "step-000010"
    kept.mkdir(parents=True)
    (kept / "state.pt").write_bytes(b"state")

    assert interrupted_message(_args(tmp_path)) == (
        "interrupted; run the same command again to resume from step 10"
    )
