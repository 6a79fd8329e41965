"""The LLM judge of the benchmarks' question answering: LongMemEval's per-type judge prompts (Wu et al., 2025),
also used for LoCoMo, and a lenient yes/no reading of the verdict.
"""

from __future__ import annotations

from memgas.answer import Messages
from memgas.llm.structured import strip_think
from memgas.llm.wrapper import LLM

__all__ = ["judge_prompt", "parse_judgement", "judge_answer"]

# ----------------------------------------------------------------------------- judge

# The answer-check prompts of LongMemEval (Wu et al., ICLR 2025; github.com/xiaowu0162/LongMemEval,
# src/evaluation/evaluate_qa.py, MIT licence), which MemGAS also uses; other types use the default.
_JUDGE_HEAD = ("I will give you a question, a correct answer, and a response from a model. Please answer yes if the "
               "response contains the correct answer. Otherwise, answer no.")
_JUDGE_STEPS = (" If the response is equivalent to the correct answer or contains all the intermediate steps to get "
                "the correct answer, you should also answer yes. If the response only contains a subset of the "
                "information required by the answer, answer no.")
_JUDGE_TAIL = ("\n\nQuestion: {}\n\nCorrect Answer: {}\n\nModel Response: {}\n\n"
               "Is the model response correct? Answer yes or no only.")
_JUDGE: dict[str, str] = {
    "default": _JUDGE_HEAD + _JUDGE_STEPS + " " + _JUDGE_TAIL,
    "temporal-reasoning": _JUDGE_HEAD + _JUDGE_STEPS + " In addition, do not penalize off-by-one errors for the "
    "number of days. If the question asks for the number of days/weeks/months, etc., and the model makes off-by-one "
    "errors (e.g., predicting 19 days when the answer is 18), the model's response is still correct. " + _JUDGE_TAIL,
    "knowledge-update": _JUDGE_HEAD + " If the response contains some previous information along with an updated "
    "answer, the response should be considered as correct as long as the updated answer is the required answer."
    + _JUDGE_TAIL,
    "single-session-preference": "I will give you a question, a rubric for desired personalized response, and a "
    "response from a model. Please answer yes if the response satisfies the desired response. Otherwise, answer no. "
    "The model does not need to reflect all the points in the rubric. The response is correct as long as it recalls "
    "and utilizes the user's personal information correctly.\n\nQuestion: {}\n\nRubric: {}\n\nModel Response: {}\n\n"
    "Is the model response correct? Answer yes or no only.",
    "abstention": "I will give you an unanswerable question, an explanation, and a response from a model. Please "
    "answer yes if the model correctly identifies the question as unanswerable. The model could say that the "
    "information is incomplete, or some other information is given but the asked information is not.\n\n"
    "Question: {}\n\nExplanation: {}\n\nModel Response: {}\n\nDoes the model correctly identify the question as "
    "unanswerable? Answer yes or no only.",
}


def judge_prompt(question: str, gold: str, response: str, qtype: str | None = None,
                 abstention: bool = False) -> Messages:
    """The LongMemEval yes/no answer-check prompt for the question type (the default for other types)."""
    template = _JUDGE["abstention"] if abstention else _JUDGE.get(qtype or "default", _JUDGE["default"])
    return [{"role": "user", "content": template.format(question, gold, response)}]


def parse_judgement(text: str) -> bool:
    """True when the judge said yes (as LongMemEval scores it: ``"yes"`` in the lower-cased reply),
    reasoning blocks removed first."""
    return "yes" in strip_think(text).lower()


def judge_answer(llm: LLM, question: str, gold: str, response: str, *, qtype: str | None = None,
                 abstention: bool = False, max_tokens: int = 10) -> bool:
    """Whether the judge model accepts ``response`` for ``question`` with the correct answer ``gold``.

    Raises:
        LLMError: the judge could not be called.
    """
    return parse_judgement(llm.complete(judge_prompt(question, gold, response, qtype, abstention),
                                        max_tokens=max_tokens).text)
