"""`python -m trainer … --help` renders for every subcommand (a % in a field's help once
crashed argparse's formatting of `run --help`)."""

from __future__ import annotations

import argparse

import pytest

from trainer.cli import build_parser, main


def _subcommands() -> list[str]:
    parser = build_parser()
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(actions[0].choices)


def test_there_are_subcommands_to_check():
    assert {"run", "eval", "analyze", "build-model"} <= set(_subcommands())


@pytest.mark.parametrize("command", [None, *_subcommands()])
def test_help_renders(command, capsys):
    with pytest.raises(SystemExit) as exit_:
        main([command, "--help"] if command else ["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage:")
    if command == "run":
        assert "--grad-checkpointing" in out and "%" in out
