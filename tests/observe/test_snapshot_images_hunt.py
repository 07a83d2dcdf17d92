"""A redacted snapshot keeps an image's digest keyed, like the caller's ids: a plain hash of
an image URL (which may name a person) let anyone holding the snapshots confirm a guessed URL.
Real builds, the real HTML."""

from __future__ import annotations

from contextwright import BuildPlan, Request
from contextwright.observe import diff_snapshots, render_html
from contextwright.observe.replay import snapshot_of
from contextwright.observe.snapshot import deployment_hasher

SECRET = "observe-images-secret"
URL = "https://cdn.example.com/users/ada.lovelace@example.com/receipt.png"


def _request(url: str) -> Request:
    return Request.from_dict({
        "user_input": "What does my receipt say?",
        "images": [{"type": "image_url", "image_url": {"url": url}}],
        "history": [{"role": "user", "content": [
            {"type": "text", "text": "Here is the one from last week"},
            {"type": "image_url", "image_url": {"url": url + "?v=2"}}]},
            {"role": "assistant", "content": "Thanks."}]})


def test_a_redacted_snapshot_keeps_image_digests_keyed() -> None:
    request = _request(URL)
    plain = request.images[0].digest()  # what anyone can compute from a guessed URL
    redacted = snapshot_of(BuildPlan.named("chat"), request, redact=True, fence_secret=SECRET)
    record = redacted.to_json()
    assert plain not in record and "ada.lovelace" not in record
    images = [image for m in redacted.messages for image in m.get("images", ())]
    assert len(images) == 2
    own = deployment_hasher(SECRET)
    assert own.identifier(plain) in [image["digest"] for image in images]
    assert redacted.request["images"][0]["digest"] == own.identifier(plain)
    page = render_html(redacted)
    assert plain not in page and "ada.lovelace" not in page

    # A raw and a redacted record of one build still read as the same images...
    raw = snapshot_of(BuildPlan.named("chat"), request)
    assert raw.request["images"][0]["image_url"]["url"] == URL  # kept for replay
    same = diff_snapshots(raw, redacted, fence_secret=SECRET)
    assert same.hashes_comparable and same.first_divergence is None and not same.items
    # ...and another image is still another rendering, redacted or not.
    other = snapshot_of(BuildPlan.named("chat"), _request(URL.replace("ada", "bob")),
                        redact=True, fence_secret=SECRET)
    moved = diff_snapshots(redacted, other, fence_secret=SECRET)
    assert moved.first_divergence is not None and moved.items
