"""The document agent's word gate and its plain results (no services)."""

from labkit.agent.supervisor.documents import Chunk, answers_question, plain_results

CHUNKS = [Chunk(5001, 5, "Гарантия › Сроки", "Гарантийный срок на ноутбуки составляет 24 месяца.")]


def test_a_question_sharing_a_word_stem_with_the_hits_is_answerable():
    assert answers_question("Какой гарантийный срок у ноутбука?", CHUNKS)


def test_a_question_with_no_word_in_the_hits_or_no_hits_abstains():
    assert not answers_question("Кто выиграл чемпионат по футболу?", CHUNKS)
    assert not answers_question("Какой гарантийный срок?", [])


def test_plain_results_cite_document_and_section():
    assert plain_results(CHUNKS).startswith("[5, Гарантия › Сроки] Гарантийный")
