"""Small benchmark records made for the tests: LongMemEval questions with their haystacks, a LoCoMo conversation."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def _u(text: str, has_answer: bool | None = None) -> dict[str, Any]:
    msg: dict[str, Any] = {"role": "user", "content": text}
    if has_answer is not None:
        msg["has_answer"] = has_answer
    return msg


def _a(text: str, has_answer: bool | None = None) -> dict[str, Any]:
    return {**_u(text, has_answer), "role": "assistant"}


FILLER_1 = [_u("Recommend a pasta recipe."), _a("Try carbonara.")]
FILLER_2 = [_u("What is 2+2?"), _a(""), _a("It is 4.")]  # a blank message, as in the real data


def lme_records() -> list[dict[str, Any]]:
    abstention = {
        "question_id": "q1_abs",
        "question_type": "single-session-user",
        "question": "What is my dog's name?",
        "answer": "You did not mention a dog.",
        "question_date": "2023/05/30 (Tue) 23:40",
        "haystack_session_ids": ["answer_a1", "filler_1"],
        "haystack_dates": ["2023/05/20 (Sat) 07:47", "2023/05/21 (Sun) 10:00"],
        "haystack_sessions": [[_u("I adopted a cat.", True), _a("Lovely.", False)], FILLER_1],
        "answer_session_ids": ["answer_a1"],
    }
    assistant_side = {
        "question_id": "q2",
        "question_type": "single-session-assistant",
        "question": "Which pasta did you recommend?",
        "answer": 7,
        "question_date": "2023/06/01 (Thu) 09:00",
        "haystack_session_ids": ["answer_b1", "filler_1"],
        "haystack_dates": ["2023/05/22 (Mon) 08:00", "2023/05/23 (Tue) 12:30"],
        "haystack_sessions": [[_u("Any pasta idea?", False), _a("Make cacio e pepe.", True)], FILLER_1],
        "answer_session_ids": ["answer_b1"],
    }
    # answer_c1 turns in memgas: 0 = [a], 1 = [u*, a], 2 = [u, a], 3 = [u*]  (* has_answer)
    scorable = {
        "question_id": "q3 multi",
        "question_type": "multi-session",
        "question": "Where do I live and what pet do I have?",
        "answer": "Oslo; a cat named Tom",
        "question_date": "2023/06/02 (Fri) 10:00",
        "haystack_session_ids": ["filler_2", "answer_c1", "filler_1", "answer_c2", "filler_2"],
        "haystack_dates": [
            "2023/05/01 (Mon) 10:00",
            "2023/05/02 (Tue) 10:00",
            "2023/05/21 (Sun) 10:00",
            "2023/05/03 (Wed) 10:00",
            "2023/05/01 (Mon) 10:00",
        ],
        "haystack_sessions": [
            FILLER_2,
            [
                _a("Hi, how can I help?"),
                _u("I adopted a cat named Tom.", True),
                _a("Nice!", False),
                _u("Also my bike is red.", False),
                _a("Noted.", False),
                _u("I moved to Oslo.", True),
            ],
            FILLER_1,
            [_u("Weather?", False), _a("Sunny in Oslo.", True)],
            FILLER_2,
        ],
        "answer_session_ids": ["answer_c1", "answer_c2"],
    }
    return [abstention, assistant_side, scorable]


def locomo_sample() -> dict[str, Any]:
    def d(dia: str, speaker: str, text: str, **extra: Any) -> dict[str, Any]:
        return {"speaker": speaker, "dia_id": dia, "text": text, **extra}

    return {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bob",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            # Bob opens session 1: memgas turns 0 = [D1:1], 1 = [D1:2, D1:3], 2 = [D1:4]
            "session_1": [
                d("D1:1", "Bob", "Hi Ann!"),
                d("D1:2", "Ann", "Hey Bob, look at my new pet."),
                d("D1:3", "Bob", "So cute!", img_url=["http://x/y.jpg"], blip_caption="a photo of a cat", query="cat"),
                d("D1:4", "Ann", "Her name is Luna."),
            ],
            "session_2_date_time": "10:04 am on 20 June, 2023",
            "session_2": [d("D2:1", "Ann", "I started painting."), d("D2:2", "Bob", "Great, show me!")],
            "session_3_date_time": "9:00 am on 1 July, 2023",  # no session_3
        },
        "qa": [
            {"question": "What did Bob say about the pet?", "answer": "So cute", "evidence": ["D1:3"], "category": 4},
            {"question": "Pet and hobby?", "answer": "Luna; painting", "evidence": ["D1:1; D2:2"], "category": 1},
            {"question": "When?", "answer": "June", "evidence": ["D2:9"], "category": 2},
            {"question": "Bob's cat?", "adversarial_answer": "Luna", "evidence": ["D2:1"], "category": 5},
            {"question": "How many?", "answer": 7, "evidence": [], "category": 3},
            {"question": "Painting when?", "answer": "June 2023", "evidence": ["D2:01"], "category": 2},
        ],
    }


# -- Memory level -----------------------------------------------------------------------------------------------
TOPICS = ("hiking in the alps", "baking sourdough bread", "my cat Miso", "learning the cello",
           "a trip to Lisbon", "fixing the bike", "tax forms", "the garden tomatoes")


def write_locomo(path: Path) -> Path:
    def turns(n: int, text: str) -> list[dict[str, str]]:
        return [{"speaker": "Ann", "dia_id": f"D{n}:1", "text": text},
                {"speaker": "Bob", "dia_id": f"D{n}:2", "text": "Good to hear."}]

    conv = {"speaker_a": "Ann", "speaker_b": "Bob",
            "session_1": turns(1, "I started pottery classes."), "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_2": turns(2, "I moved to Oslo."), "session_2_date_time": "2:00 pm on 9 June, 2023"}
    qa = [{"question": "Where did Ann move?", "answer": "Oslo", "evidence": ["D2:1"], "category": 4},
          {"question": "What class did Ann start?", "answer": "pottery", "evidence": ["D1:1"], "category": 1},
          {"question": "What did Bob move to?", "adversarial_answer": "Oslo", "evidence": ["D2:1"], "category": 5}]
    path.write_text(json.dumps([{"sample_id": "conv-1", "conversation": conv, "qa": qa}]), encoding="utf-8")
    return path
