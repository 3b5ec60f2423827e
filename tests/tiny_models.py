"""Tiny random transformers models saved like real checkpoints, for tests and benchmarks.

They go through the same ``from_pretrained`` path users' models do (set ``HF_HUB_OFFLINE=1``), need
no network and no torchvision: a LLaVA-style chat VLM (CLIP vision tower + Llama text model,
``LlavaProcessor`` with a byte-level tokenizer and a small chat template) and a CLIP dual encoder.
"""

from __future__ import annotations

from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% elif c['type'] == 'text' %}{{ c['text'] }}{% endif %}"
    "{% endfor %}{% endif %}\n{% endfor %}{% if add_generation_prompt %}<|assistant|>\n{% endif %}"
)


def byte_vocab(clip: bool = False) -> dict[str, int]:
    from tokenizers.pre_tokenizers import ByteLevel

    symbols = sorted(ByteLevel.alphabet())
    if clip:
        symbols += [s + "</w>" for s in symbols]
    return {s: i for i, s in enumerate(symbols)}


def build_tiny_llava(folder: Path, seed: int = 0, image_size: int = 32, with_processor: bool = True,
                     hidden: int = 32, layers: int = 2) -> Path:
    """A tiny random LLaVA (by default hidden size 32, two layers each side) saved to ``folder``."""
    import torch
    from transformers import (CLIPImageProcessor, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor, Qwen2Tokenizer)

    tok = Qwen2Tokenizer(vocab=byte_vocab(), merges=[])
    tok.add_special_tokens({"pad_token": "<pad>", "eos_token": "</s>", "bos_token": "<s>",
                            "additional_special_tokens": ["<image>", "<|user|>", "<|assistant|>"]})
    image_processor = CLIPImageProcessor(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size})
    processor = LlavaProcessor(image_processor=image_processor, tokenizer=tok, patch_size=8,
                               vision_feature_select_strategy="default", num_additional_image_tokens=1,
                               chat_template=CHAT_TEMPLATE)
    config = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                                       num_attention_heads=2, image_size=image_size, patch_size=8, projection_dim=hidden),
        text_config=LlamaConfig(hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=layers,
                                num_attention_heads=2, num_key_value_heads=2, vocab_size=len(tok), max_position_embeddings=8192),
        image_token_index=tok.convert_tokens_to_ids("<image>"), vision_feature_select_strategy="default",
        vision_feature_layer=-1, pad_token_id=tok.pad_token_id,
    )
    torch.manual_seed(seed)
    model = LlavaForConditionalGeneration(config)
    model.generation_config.pad_token_id = tok.pad_token_id
    model.generation_config.eos_token_id = tok.eos_token_id
    model.save_pretrained(folder)
    if with_processor:
        processor.save_pretrained(folder)
    return Path(folder)


def build_tiny_clip(folder: Path, seed: int = 0, image_size: int = 32) -> Path:
    """A tiny random CLIPModel + CLIPProcessor saved to ``folder``."""
    import torch
    from transformers import CLIPConfig, CLIPImageProcessor, CLIPModel, CLIPProcessor, CLIPTokenizer

    vocab = byte_vocab(clip=True)
    vocab.update({"<|startoftext|>": len(vocab), "<|endoftext|>": len(vocab) + 1})
    tok = CLIPTokenizer(vocab=vocab, merges=[], unk_token="<|endoftext|>", bos_token="<|startoftext|>",
                        eos_token="<|endoftext|>", pad_token="<|endoftext|>")
    image_processor = CLIPImageProcessor(size={"shortest_edge": image_size}, crop_size={"height": image_size, "width": image_size})
    processor = CLIPProcessor(image_processor=image_processor, tokenizer=tok)
    config = CLIPConfig(
        text_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                     "vocab_size": len(tok), "max_position_embeddings": 77,
                     "bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id},
        vision_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2,
                       "image_size": image_size, "patch_size": 8},
        projection_dim=16,
    )
    torch.manual_seed(seed)
    model = CLIPModel(config)
    with torch.no_grad():  # share a direction between the towers so cosines are positive yet still vary
        shared = torch.randn(32)
        for norm in (model.text_model.final_layer_norm, model.vision_model.post_layernorm):
            norm.bias.copy_(shared)
            norm.weight.mul_(0.7)
        model.visual_projection.weight.copy_(model.text_projection.weight)
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    return Path(folder)


def build_bench(folder: Path, n_pairs: int = 4, texts: list[str] | None = None, task_file: str = "t2i.json") -> Path:
    """A hand-made benchmark folder in MMRB2's layout: ``n_pairs`` image pairs for one task.

    ``texts`` (one per pair) become the prompts; API tests put scripted-behaviour markers there.
    """
    import json

    from PIL import Image

    bench = Path(folder)
    (bench / "images").mkdir(parents=True, exist_ok=True)
    (bench / "input_images").mkdir(exist_ok=True)
    pairs = []
    for i in range(n_pairs):
        for side, colour in (("a", (200, 30 + 5 * i, 30)), ("b", (30, 30, 200 - 5 * i))):
            Image.new("RGB", (40, 32), colour).save(bench / "images" / f"{i}_{side}.png")
        prompt = texts[i] if texts else f"a red square, number {i}"
        pairs.append({
            "id": f"pair{i}", "prompt_source": "handmade", "prompt_content": [["text", prompt]],
            "prompt_metadata": {},
            "response_a": {"model_name": "m1", "response_content": [["text", "here it is"], ["image", f"{i}_a.png"]]},
            "response_b": {"model_name": "m2", "response_content": [["image", f"{i}_b.png"]]},
            "chosen": "A", "human_annotations": [6, 5, 6],
        })
    (bench / task_file).write_text(json.dumps({"pairs": pairs}))
    return bench
