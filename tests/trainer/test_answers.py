"""Math answer extraction and matching: the tricky spellings a model really produces."""

from __future__ import annotations

import pytest

from trainer.tasks.answers import answers_match, extract_boxed, normalize_answer, to_fraction


@pytest.mark.parametrize(
    "text, expected",
    [
        (r"so the answer is \boxed{22}.", "22"),
        (r"\boxed{\frac{1}{2}}", r"\frac{1}{2}"),
        (r"first \boxed{3}, then on reflection \boxed{4}", "4"),
        (r"\boxed{ 12 }", "12"),
        (r"$\boxed{x^{2}+1}$", "x^{2}+1"),
        (r"\boxed {7}", "7"),
        (r"the answer is $\boxed 5$.", "5"),
        (r"\boxed -3", "-3"),
        (r"\fbox{9}", "9"),
        (r"\boxed{\{1,2\}}", r"\{1,2\}"),  # escaped braces do not close the box
        (r"\boxed{\text{(B)}}", r"\text{(B)}"),
        (r"12+7=\boxed{19}", "19"),  # the tiny models' worked format
    ],
)
def test_it_extracts_the_last_boxed_answer(text, expected):
    assert extract_boxed(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        None,
        "no box here, the answer is 5",
        r"Put the final answer in \boxed{}.",  # an empty box is no answer
        r"\boxed{\frac{1}{2}",  # cut off before the box closed
        r"\boxedfoo{3}",
    ],
)
def test_it_finds_no_answer_where_there_is_none(text):
    assert extract_boxed(text) is None


def test_a_truncated_last_box_falls_back_to_the_last_complete_one():
    assert extract_boxed(r"\boxed{3} hmm, no: \boxed{4") == "3"


@pytest.mark.parametrize(
    "raw, canonical",
    [
        ("12", "12"),
        ("012", "12"),
        ("+5", "5"),
        ("-0", "0"),
        ("-0.0", "0"),
        ("2.0", "2"),
        ("2.50", "5/2"),
        ("0.5", "1/2"),
        (".5", "1/2"),
        ("1/2", "1/2"),
        ("2/4", "1/2"),
        ("-6/4", "-3/2"),
        (r"\frac{1}{2}", "1/2"),
        (r"\dfrac{3}{9}", "1/3"),
        (r"\tfrac12", "1/2"),
        (r"\frac{-1}{2}", "-1/2"),
        (r"-\frac{2}{4}", "-1/2"),
        (r"2\frac{1}{2}", "5/2"),  # a mixed number, not 21/2
        ("1,000", "1000"),
        ("1,234,567.5", "2469135/2"),
        (r"1{,}000", "1000"),
        ("1e3", "1000"),
        ("$5$", "5"),
        (r"\(5\)", "5"),
        (r"\$18", "18"),
        ("5.", "5"),
        ("x = 5", "5"),
        ("y=-3", "-3"),
        (r"5 \text{ cm}", "5"),
        (r"12\,\mathrm{m}^2", "12"),
        ("18 dollars", "18"),
        (r"90^\circ", "90"),
        (r"90^{\circ}", "90"),
        ("90°", "90"),
        (r"50\%", "50"),
        ("50%", "50"),
        (r"\text{(B)}", "B"),
        ("(C)", "C"),
        (r"\left( 1, 2 \right)", "(1,2)"),
        (r"\sqrt 2", r"\sqrt{2}"),
        (r"\frac{\sqrt{3}}{2}", r"\frac{\sqrt{3}}{2}"),
        ("\u22125", "-5"),  # a Unicode minus sign
        (r"\boxed{7}", "7"),
        (r"\text{Monday}", "Monday"),
        ("(1,234)", "(1,234)"),  # a pair, not one thousand two hundred and thirty-four
        ("", ""),
        (None, ""),
    ],
)
def test_it_normalizes_answers(raw, canonical):
    assert normalize_answer(raw) == canonical


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("0.50", "1/2"),
        (r"\frac{1}{2}", "0.5"),
        (r"\dfrac{2}{4}", r"\frac12"),
        ("1,000", "1000"),
        ("1000.00", "1,000"),
        ("22", "22"),
        ("-0", "0"),
        ("x = 5", "5"),
        (r"5\text{ cm}", "5"),
        (r"\$1,000", "1000"),
        (r"50\%", "50"),
        ("3.0", "3"),
        (r"\left(1,2\right)", "(1, 2)"),
        (r"\text{(B)}", "B"),
        (r"\sqrt2", r"\sqrt{2}"),
        ("1e2", "100"),
        (r"\boxed{22}", "22"),
    ],
)
def test_equal_answers_match(pred, gold):
    assert answers_match(pred, gold)
    assert answers_match(gold, pred)


@pytest.mark.parametrize(
    "pred, gold",
    [
        ("21", "22"),
        ("0.333", "1/3"),  # no floating tolerance
        (r"50\%", "0.5"),  # a percent sign is a unit, not a factor of 1/100
        ("1/2", "2"),
        ("-5", "5"),
        ("", "0"),
        (None, "0"),
        ("5", None),
        (r"\sqrt{2}", r"\sqrt{3}"),
        ("(1,2)", "(2,1)"),
        ("2x", "2"),
        ("1/0", "0"),
        ("12", "1,2"),
    ],
)
def test_different_answers_do_not_match(pred, gold):
    assert not answers_match(pred, gold)


def test_numbers_parse_exactly():
    assert to_fraction("0.1") * 3 == to_fraction("0.3")
    assert to_fraction("1/0") is None
    assert to_fraction("1e99999") is None  # absurd exponents are not expanded
    assert to_fraction("nan") is None and to_fraction("inf") is None
    assert to_fraction("9" * 1000) is None  # nor are absurdly long numbers


def test_extraction_and_matching_compose_as_the_math_task_uses_them():
    completion = r"We have (3*4)+(5+2) = 12 + 7, so the answer is $\boxed{19}$."
    assert answers_match(extract_boxed(completion), "19")
