"""One table of answer comparisons, for both copies of the rules: the harness that runs inside
the sandbox (trainer/tasks/harness.py) and the second opinion's own code in the trainer
(trainer/tasks/second_opinion.py). tests/trainer/test_comparisons.py runs every row against
both, so the two can never drift: a drift would flag honest answers as reward hacking, or let
a wrong one through twice.

VALUES: (what the program returns, as Python source; the expected value as JSON gives it; the
tolerance the problem states; whether they match).
TEXTS: (what the program prints; the expected output; the tolerance; whether they match).
"""

from __future__ import annotations

BIG = 3_000_000_021
HUGE = 10**400 + 7

VALUES = [
    # integers compare exactly, and a bool is not an int
    ("3", 3, 1e-6, True),
    ("3.0", 3, 1e-6, False),
    ("True", 1, 1e-6, False),
    ("1", True, 1e-6, False),
    ("False", False, 1e-6, True),
    (f"{BIG}", BIG, 1e-6, True),
    (f"float({BIG} - 900) + 900.0", BIG, 1e-6, False),
    (f"{BIG} + 1", BIG, 1e-6, False),
    ("10**400 + 7", HUGE, 1e-6, True),
    ("10**400 + 8", HUGE, 1e-6, False),
    ("float(10**300)", HUGE, 1e-6, False),
    # floats: finite, within the stated tolerance; NaN and ±inf only themselves
    ("0.1 + 0.2", 0.3, 1e-6, True),
    ("0.3000001", 0.3, 1e-6, True),
    ("0.31", 0.3, 1e-6, False),
    ("0.31", 0.3, 0.05, True),
    ("0.1 + 0.2", 0.3, 0.0, False),
    ("0.5", 0.5, 0.0, True),
    ("1", 1.0, 1e-6, False),
    ("True", 1.0, 1e-6, False),
    ("float('nan')", 0.5, 1e-6, False),
    ("float('nan')", 2, 1e-6, False),
    ("float('inf')", 1e308, 1e-6, False),
    ("float('inf')", float("inf"), 1e-6, True),
    ("-float('inf')", float("inf"), 1e-6, False),
    ("1e308", float("inf"), 1e-6, False),
    ("float('nan')", float("nan"), 1e-6, True),
    ("0.5", float("nan"), 1e-6, False),
    ("1e-7", 0.0, 1e-6, True),
    ("2e-6", 0.0, 1e-6, False),
    ("2000000.5", 2000000.0, 1e-6, True),
    ("2000003.0", 2000000.0, 1e-6, False),
    # strings and None: only themselves
    ("'a'", "a", 1e-6, True),
    ("'a '", "a", 1e-6, False),
    ("'nan'", "nan", 1e-6, True),
    ("None", None, 1e-6, True),
    ("0", None, 1e-6, False),
    ("''", None, 1e-6, False),
    # containers: the same shape, items by the same rules at every depth
    ("(1, 2)", [1, 2], 1e-6, True),
    ("[1, 2, 3]", [1, 2], 1e-6, False),
    ("[[1, 2.0000000001], ['x']]", [[1, 2.0], ["x"]], 1e-6, True),
    ("[[1, float('nan')], ['x']]", [[1, 2.0], ["x"]], 1e-6, False),
    ("[[True, 2.0], ['x']]", [[1, 2.0], ["x"]], 1e-6, False),
    ("[1.0]", [1], 1e-6, False),
    ("{'a': 1, 'b': [0.5]}", {"a": 1, "b": [0.5]}, 1e-6, True),
    ("{'a': 1, 'b': [float('nan')]}", {"a": 1, "b": [0.5]}, 1e-6, False),
    ("{'a': 1}", {"a": 1, "b": 2}, 1e-6, False),
    ("{1: 1}", {"1": 1}, 1e-6, False),
    ("{1, 2}", [1, 2], 1e-6, False),
    # TACO wraps expected values in a one-item list
    ("3", [3], 1e-6, True),
    ("[3]", [3], 1e-6, True),
    ("3.0", [3], 1e-6, False),
    ("[3, 4]", [[3, 4]], 1e-6, True),
]

TEXTS = [
    # the documented normalisation: trailing space and blank lines, whitespace between tokens
    ("1 2\n", "1 2", 1e-6, True),
    ("1\n\n2  \n", "1\n2", 1e-6, True),
    ("1   2", "1 2", 1e-6, True),
    ("1 2", "1  2 3", 1e-6, False),
    ("1\n2", "1 2", 1e-6, False),
    ("", "", 1e-6, True),
    ("a\nb", "a", 1e-6, False),
    ("x", "y", 1e-6, False),
    # integer tokens compare as text
    ("6", "6", 1e-6, True),
    ("6.0", "6", 1e-6, False),
    ("+6", "6", 1e-6, False),
    ("3000000921", "3000000021", 1e-6, False),
    (str(HUGE), str(HUGE), 1e-6, True),
    (str(HUGE + 1), str(HUGE), 1e-6, False),
    # decimal tokens: within the tolerance, both finite
    ("0.5", "0.500000", 1e-6, True),
    ("0.5000001", "0.5", 1e-6, True),
    ("0.51", "0.5", 1e-6, False),
    ("0.51", "0.5", 0.1, True),
    ("0.5000001", "0.5", 0.0, False),
    ("5e-1", "0.5", 1e-6, True),
    ("1e-9", "0.0", 1e-6, True),
    ("1e-9", "0", 1e-6, False),
    ("1", "1.0", 1e-6, True),
    ("nan", "6", 1e-6, False),
    ("nan", "0.5", 1e-6, False),
    ("NaN", "0.5", 1e-6, False),
    ("inf", "1.5", 1e-6, False),
    ("-inf", "-1.5", 1e-6, False),
    ("1e999", "1.5", 1e-6, False),
    ("1e999", "1e999", 1e-6, True),
    ("2e999", "1e999", 1e-6, False),
    ("nan", "nan", 1e-6, True),
    ("inf", "nan", 1e-6, False),
    ("1_000.0", "1000.0", 1e-6, False),
    ("0x10", "16.0", 1e-6, False),
    ("\u0661.5", "1.5", 1e-6, False),  # an Arabic-Indic digit: float() would read it
    ("nan nan", "6 1.5", 1e-6, False),
    ("6\nnan", "6\n1.5", 1e-6, False),
    ("6\n1.5000000001", "6\n1.5", 1e-6, True),
]
