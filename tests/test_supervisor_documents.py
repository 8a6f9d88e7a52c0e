"""The document agent without services: its abstention rule, its prompts, its plain results."""

import pytest

from labkit.agent.supervisor.documents import (
    ABSTAIN,
    CHECK,
    SYSTEM,
    SYSTEM_ABSTAIN,
    Chunk,
    DocumentAgent,
    answer_messages,
    answers_question,
    plain_results,
)
from labkit.models.relevance import JudgeUnavailable

CHUNKS = [Chunk(5001, 5, "Гарантия › Сроки", "Гарантийный срок на ноутбуки составляет 24 месяца.")]


def test_a_question_sharing_a_word_stem_with_the_hits_is_answerable():
    assert answers_question("Какой гарантийный срок у ноутбука?", CHUNKS)


def test_a_question_with_no_word_in_the_hits_or_no_hits_abstains():
    assert not answers_question("Кто выиграл чемпионат по футболу?", CHUNKS)
    assert not answers_question("Какой гарантийный срок?", [])


def test_plain_results_cite_document_and_section():
    assert plain_results(CHUNKS).startswith("[5, Гарантия › Сроки] Гарантийный")


class _NoLogprobsServer:
    """Stand-in for a server that ignores ``logprobs`` (an Ollama before 0.12.11): ours always gives them, so this
    path cannot be produced on demand with the real one. It records each request and answers with a fixed text."""

    def __init__(self) -> None:
        self.requests: list[dict] = []

    def __call__(self, **request):
        import ollama

        self.requests.append(request)
        return ollama.ChatResponse(model=request["model"], message=ollama.Message(role="assistant", content="24 месяца."))


def test_without_log_probabilities_the_model_is_asked_to_abstain_itself():
    server = _NoLogprobsServer()
    agent = DocumentAgent.__new__(DocumentAgent)  # no lab: answer() only needs the chat and the model
    agent.chat, agent.model = server, "any-model"
    reply = agent.answer("Какой гарантийный срок у ноутбука?", CHUNKS)
    check, answer = server.requests
    assert check["options"]["num_predict"] == 1 and check["messages"][-1]["content"].endswith(CHECK)
    assert answer["messages"][0]["content"] == SYSTEM_ABSTAIN and ABSTAIN in answer["messages"][0]["content"]
    assert reply.answer == "24 месяца." and not reply.abstained and reply.citations == [(5, "Гарантия › Сроки")]
    assert "answerable" not in reply.extra


def test_the_check_and_the_answer_prompts_differ_only_after_the_question():
    """So the server's prompt cache reads the data and the fragments once for both calls."""
    server = _NoLogprobsServer()
    agent = DocumentAgent.__new__(DocumentAgent)
    agent.chat, agent.model = server, "any-model"
    question, data = "Какой гарантийный срок у ноутбука?", "Ответ по данным магазина: 3."
    with pytest.raises(JudgeUnavailable):
        agent.answerable(question, CHUNKS, data)
    check, = server.requests
    answer = answer_messages(question, CHUNKS, data)
    assert check["messages"][0] == answer[0] and answer[0]["content"] == SYSTEM and "ответа нет" not in SYSTEM
    assert check["messages"][-1]["content"] == f"{answer[-1]['content']}\n\n{CHECK}"
    assert answer[-1]["content"].startswith(f"Данные: {data}") and answer[-1]["content"].endswith(f"Вопрос: {question}")
