"""A tiny random-weight llama GGUF with a real tokenizer vocabulary, for end-to-end tests
against llama.cpp's server (no weights can be downloaded; the output is random text)."""

from __future__ import annotations

from pathlib import Path

import numpy as np


def write_tiny_model(
    vocab_gguf: Path,
    out: Path,
    chat_template: str,
    seed: int = 0,
    special_tokens: tuple[str, ...] = ("<tool_call>", "</tool_call>"),
) -> Path:
    """Write the model; ``special_tokens`` take the places of the vocabulary's last
    ``[PAD...]`` placeholders (as in the real Qwen2 vocabulary), as user-defined tokens."""
    import gguf

    reader = gguf.GGUFReader(str(vocab_gguf))
    tokens = list(reader.fields["tokenizer.ggml.tokens"].contents())
    token_types = list(reader.fields["tokenizer.ggml.token_type"].contents())
    pads = [i for i, t in enumerate(tokens) if t.startswith("[PAD")][: len(special_tokens)]
    for index, text in zip(pads, special_tokens, strict=True):
        tokens[index] = text
        token_types[index] = int(gguf.TokenType.USER_DEFINED)
    replaced = {"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": token_types}
    n_vocab, n_embd, n_ff, n_layer, n_head = len(tokens), 64, 128, 2, 4
    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_context_length(2048)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_file_type(0)
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer.") or name == "tokenizer.chat_template":
            continue
        vtype = field.types[0]
        if vtype == gguf.GGUFValueType.ARRAY:
            value = replaced.get(name, field.contents())
            writer.add_key_value(name, value, vtype, sub_type=field.types[-1])
        else:
            writer.add_key_value(name, field.contents(), vtype)
    writer.add_chat_template(chat_template)
    rng = np.random.default_rng(seed)

    def tensor(name: str, *shape: int, scale: float = 0.05) -> None:
        writer.add_tensor(name, rng.standard_normal(shape, dtype=np.float32) * np.float32(scale))

    tensor("token_embd.weight", n_vocab, n_embd)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
    tensor("output.weight", n_vocab, n_embd)
    for i in range(n_layer):
        writer.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
        for part in ("attn_q", "attn_k", "attn_v", "attn_output"):
            tensor(f"blk.{i}.{part}.weight", n_embd, n_embd)
        tensor(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
        tensor(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
        tensor(f"blk.{i}.ffn_down.weight", n_embd, n_ff)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return out
