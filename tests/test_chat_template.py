"""A Hugging Face tokenizer's chat framing, measured from the chat template shipped beside it:
the counted total of a build equals the token count of the fully rendered template."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer, models, pre_tokenizers, trainers

from contextwright import BuildPlan, ContextBuilder, Request
from contextwright.errors import TokenizerError
from contextwright.tokens import HuggingFaceTokenizer
from contextwright.tokens._chat_template import find_chat_template

SPECIALS = ["<s>", "<|im_start|>", "<|im_end|>"]
CHATML = ("{{ bos_token }}{% for message in messages %}"
          "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
          "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
# Qwen-style: a default system prompt when the conversation brings none, tool results framed
# as the user's, and a check that roles are known.
WITH_DEFAULT_SYSTEM = (
    "{% if messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}{% endif %}"
    "{% for message in messages %}"
    "{% if message['role'] not in ['system', 'user', 'assistant', 'tool'] %}"
    "{{ raise_exception('unknown role') }}{% endif %}"
    "{% if message['role'] == 'tool' %}"
    "{{ '<|im_start|>user\\n<tool_response>\\n' + message['content'] + "
    "'\\n</tool_response><|im_end|>\\n' }}"
    "{% else %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + "
    "'<|im_end|>\\n' }}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
NO_SYSTEM_ROLE = ("{% for message in messages %}{% if message['role'] == 'system' %}"
                  "{{ raise_exception('System role not supported') }}{% endif %}"
                  "{{ message['role'] + ': ' + message['content'] + '\\n' }}{% endfor %}")
CORPUS = ["hello world the weather is cloudy today", "what will the weather be tomorrow",
          "you are a helpful assistant answer briefly", "system user assistant tool response",
          "alpha bravo charlie delta echo foxtrot golf hotel india",
          "rain sun snow wind in shanghai beijing paris"] * 20


def word_level() -> Tokenizer:
    vocab = {word: i for i, word in enumerate(
        ["[UNK]", *sorted({w for line in CORPUS for w in line.split()})])}
    tokenizer = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tokenizer.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer.add_special_tokens(SPECIALS)
    return tokenizer


def byte_level_bpe() -> Tokenizer:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=SPECIALS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(CORPUS, trainer)
    return tokenizer


def folder(tmp_path: Path, tokenizer: Tokenizer, template: object = CHATML,
           as_file: bool = False) -> Path:
    tokenizer.save(str(tmp_path / "tokenizer.json"))
    config: dict[str, Any] = {"bos_token": {"content": "<s>", "special": True},
                              "eos_token": "<|im_end|>"}
    if as_file:
        (tmp_path / "chat_template.jinja").write_text(str(template), "utf-8")
    elif template is not None:
        config["chat_template"] = template
    (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), "utf-8")
    return tmp_path / "tokenizer.json"


def rendered_tokens(path: Path, template: str, messages: list[dict[str, Any]]) -> int:
    """The whole conversation rendered by the template as transformers does, then tokenized."""
    environment = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    environment.globals["raise_exception"] = lambda message: (_ for _ in ()).throw(
        ValueError(message))
    text = environment.from_string(template).render(
        messages=messages, add_generation_prompt=True, bos_token="<s>", eos_token="<|im_end|>")
    return len(Tokenizer.from_file(str(path)).encode(text, add_special_tokens=False).ids)


REQUESTS = {
    "system and history": Request(
        user_input="what will the weather be tomorrow", system="you are a helpful assistant",
        history=[{"role": "user", "content": "hello world"},
                 {"role": "assistant", "content": "the weather is cloudy today"},
                 {"role": "user", "content": "rain in shanghai"},
                 {"role": "assistant", "content": "sun in beijing"}]),
    "no system": Request(user_input="hello world", history=[
        {"role": "user", "content": "alpha bravo"}, {"role": "assistant", "content": "charlie"}]),
    "question only": Request(user_input="what will the weather be tomorrow in paris"),
    "unknown words": Request(user_input="zebra quokka", system="answer briefly"),
}


@pytest.mark.parametrize("make", [word_level, byte_level_bpe], ids=["wordlevel", "bpe"])
@pytest.mark.parametrize("template", [CHATML, WITH_DEFAULT_SYSTEM], ids=["chatml", "qwen-like"])
@pytest.mark.parametrize("name", list(REQUESTS))
def test_the_counted_total_is_the_rendered_templates_token_count(
        tmp_path: Path, make: Any, template: str, name: str) -> None:
    path = folder(tmp_path, make(), template)
    builder = ContextBuilder(tokenizer=str(path))
    ctx = builder.build(BuildPlan.named("chat"), REQUESTS[name])
    assert builder.tokenizer.exact and ctx.report.exact_tokens
    assert "(estimated)" not in ctx.report.format_debug()
    assert ctx.total_tokens == rendered_tokens(path, template, ctx.to_messages("openai"))
    assert ctx.recount() == ctx.total_tokens


def test_a_chat_template_jinja_file_and_named_templates_are_read(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    path = folder(tmp_path / "a", word_level(), CHATML, as_file=True)
    found = find_chat_template(path)
    assert found is not None and found.origin == "chat_template.jinja"
    named = folder(tmp_path / "b", word_level(), [
        {"name": "tool_use", "template": NO_SYSTEM_ROLE}, {"name": "default", "template": CHATML}])
    tokenizer = HuggingFaceTokenizer(named)
    assert tokenizer.exact and tokenizer.chat_frame is not None
    # <|im_start|> user <|im_end|> around a message; <s> and "<|im_start|> assistant" before
    # the reply (white space is no token for this tokenizer).
    assert (tokenizer.chat_frame.user, tokenizer.chat_frame.reply) == (3, 3)


def test_named_templates_without_a_default_fall_back_and_say_so(tmp_path: Path) -> None:
    path = folder(tmp_path, word_level(), [{"name": "tool_use", "template": CHATML}])
    ctx = ContextBuilder(tokenizer=str(path)).build(BuildPlan.named("chat"),
                                                    Request(user_input="hello"))
    assert not ctx.report.exact_tokens
    assert any("no 'default' one" in w for w in ctx.report.warnings)


def test_a_template_that_fails_to_render_is_reported_and_counts_are_estimated(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = folder(tmp_path, word_level(), NO_SYSTEM_ROLE)
    tokenizer = HuggingFaceTokenizer(path)
    assert not tokenizer.exact and tokenizer.chat_frame is None
    assert "System role not supported" in (tokenizer.warning or "")
    assert "System role not supported" in caplog.text
    ctx = ContextBuilder(tokenizer=tokenizer).build(BuildPlan.named("chat"),
                                                    Request(user_input="hello", system="be brief"))
    assert not ctx.report.exact_tokens
    assert any("fails to render" in w for w in ctx.report.warnings)


def test_a_template_whose_framing_depends_on_position_is_not_taken_as_exact(
        tmp_path: Path) -> None:
    numbered = ("{% for message in messages %}{{ message['role'] + ' ' + "
                "(loop.index * 'x ') + message['content'] + '\\n' }}{% endfor %}")
    tokenizer = HuggingFaceTokenizer(folder(tmp_path, word_level(), numbered))
    assert not tokenizer.exact and "not the same for every message" in (tokenizer.warning or "")


def test_a_template_that_does_not_compile_is_reported(tmp_path: Path) -> None:
    tokenizer = HuggingFaceTokenizer(folder(tmp_path, word_level(), "{% for %}"))
    assert not tokenizer.exact and "does not compile" in (tokenizer.warning or "")


def test_without_a_template_counts_stay_estimated_without_a_warning(tmp_path: Path) -> None:
    tokenizer = HuggingFaceTokenizer(folder(tmp_path, word_level(), None))
    assert not tokenizer.exact and tokenizer.warning is None
    assert tokenizer.frame_note == "no chat template beside the tokenizer.json"


def test_contexts_with_tools_stay_estimated(tmp_path: Path) -> None:
    path = folder(tmp_path, word_level(), WITH_DEFAULT_SYSTEM)
    tool = {"type": "function", "function": {"name": "weather", "parameters": {}}}
    ctx = ContextBuilder(tokenizer=str(path)).build(
        BuildPlan.named("tool_heavy"), Request(user_input="weather in paris", tools=[tool]))
    assert not ctx.report.exact_tokens


def test_a_bad_tokenizer_config_is_a_tokenizer_error(tmp_path: Path) -> None:
    path = folder(tmp_path, word_level(), CHATML)
    (tmp_path / "tokenizer_config.json").write_text("{not json", "utf-8")
    with pytest.raises(TokenizerError, match="not valid JSON"):
        find_chat_template(path)
