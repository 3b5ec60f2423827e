"""Tiny random models saved to a folder, for tests that load them back through the real ``from_pretrained``.

Each builder writes once per test session (cached by kind) and returns the folder. Everything is built
from configs with a fixed torch seed; byte-level tokenizers need no files. Import inside tests only
after ``pytest.importorskip("torch")`` etc., since this module imports torch, diffusers and transformers.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")

CHAT_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n"
    "{% if m['content'] is string %}{{ m['content'] }}{% else %}{% for c in m['content'] %}"
    "{% if c['type'] == 'image' %}<image>{% else %}{{ c['text'] }}{% endif %}{% endfor %}{% endif %}"
    "<|im_end|>\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)

_built: dict[str, Path] = {}


def cached(kind: str, factory: pytest.TempPathFactory, build: Callable[[Path], None]) -> Path:
    if kind not in _built or not _built[kind].exists():
        folder = factory.mktemp(kind)
        build(folder)
        _built[kind] = folder
    return _built[kind]


def byte_vocab(specials: list[str], suffix_variants: bool = False) -> dict[str, int]:
    from tokenizers.pre_tokenizers import ByteLevel

    vocab: dict[str, int] = {}
    for s in specials:
        vocab[s] = len(vocab)
    alphabet = sorted(ByteLevel.alphabet())
    for a in alphabet:
        vocab[a] = len(vocab)
    if suffix_variants:
        for a in alphabet:
            vocab[a + "</w>"] = len(vocab)
    return vocab


def clip_tokenizer():
    from transformers import CLIPTokenizer

    vocab = byte_vocab(["<|startoftext|>", "<|endoftext|>"], suffix_variants=True)
    return CLIPTokenizer(vocab=vocab, merges=[], bos_token="<|startoftext|>", eos_token="<|endoftext|>",
                         pad_token="<|endoftext|>", unk_token="<|endoftext|>", model_max_length=77)


def sd_components(in_channels: int = 4) -> dict:
    import torch
    from diffusers import AutoencoderKL, DDIMScheduler, UNet2DConditionModel
    from transformers import CLIPTextConfig, CLIPTextModel

    torch.manual_seed(0)
    unet = UNet2DConditionModel(
        block_out_channels=(32, 64), layers_per_block=1, sample_size=16, in_channels=in_channels, out_channels=4,
        down_block_types=("DownBlock2D", "CrossAttnDownBlock2D"), up_block_types=("CrossAttnUpBlock2D", "UpBlock2D"),
        cross_attention_dim=32, norm_num_groups=8, attention_head_dim=8)
    vae = AutoencoderKL(block_out_channels=(32, 64), in_channels=3, out_channels=3,
                        down_block_types=("DownEncoderBlock2D",) * 2, up_block_types=("UpDecoderBlock2D",) * 2,
                        latent_channels=4, norm_num_groups=8, sample_size=32)
    text = CLIPTextModel(CLIPTextConfig(hidden_size=32, intermediate_size=64, num_attention_heads=4, num_hidden_layers=2,
                                        vocab_size=1000, max_position_embeddings=77, bos_token_id=0, eos_token_id=1,
                                        pad_token_id=1))
    sched = DDIMScheduler(beta_start=0.00085, beta_end=0.012, beta_schedule="scaled_linear", clip_sample=False,
                          set_alpha_to_one=False, steps_offset=1)
    return dict(unet=unet, vae=vae, text_encoder=text, tokenizer=clip_tokenizer(), scheduler=sched,
                safety_checker=None, feature_extractor=None, requires_safety_checker=False)


def build_sd(folder: Path) -> None:
    """A StableDiffusionPipeline whose default output is 32x32."""
    from diffusers import StableDiffusionPipeline

    StableDiffusionPipeline(**sd_components()).save_pretrained(folder)


def build_pix2pix(folder: Path) -> None:
    from diffusers import StableDiffusionInstructPix2PixPipeline

    StableDiffusionInstructPix2PixPipeline(**sd_components(in_channels=8)).save_pretrained(folder)


def build_chat_lm(folder: Path) -> None:
    """A tiny Qwen2 causal LM with a byte-level tokenizer and a ChatML-style template."""
    import torch
    from transformers import Qwen2Config, Qwen2ForCausalLM, Qwen2Tokenizer

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Qwen2Tokenizer(vocab=byte_vocab(specials), merges=[], unk_token=None, bos_token=None,
                         eos_token="<|im_end|>", pad_token="<|endoftext|>")
    tok.chat_template = CHAT_TEMPLATE
    torch.manual_seed(0)
    cfg = Qwen2Config(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tok.pad_token_id,
                      bos_token_id=None, tie_word_embeddings=True)
    Qwen2ForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)


def build_llava(folder: Path) -> None:
    """A tiny LLaVA (CLIP vision + Llama) with a byte tokenizer: AutoModelForImageTextToText + AutoProcessor."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import (CLIPImageProcessorPil, CLIPVisionConfig, LlamaConfig, LlavaConfig,
                              LlavaForConditionalGeneration, LlavaProcessor, PreTrainedTokenizerFast)

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<image>"]
    vocab = byte_vocab(specials)
    core = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    core.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    core.decoder = decoders.ByteLevel()
    tok = PreTrainedTokenizerFast(tokenizer_object=core, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                  additional_special_tokens=["<|im_start|>", "<image>"])
    tok.chat_template = CHAT_TEMPLATE
    image_size, patch = 32, 8
    proc = LlavaProcessor(image_processor=CLIPImageProcessorPil(size={"shortest_edge": image_size},
                                                                crop_size={"height": image_size, "width": image_size}),
                          tokenizer=tok, patch_size=patch, vision_feature_select_strategy="default",
                          chat_template=CHAT_TEMPLATE, image_token="<image>", num_additional_image_tokens=1)
    torch.manual_seed(0)
    cfg = LlavaConfig(
        vision_config=CLIPVisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                                       image_size=image_size, patch_size=patch, projection_dim=32),
        text_config=LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                                eos_token_id=tok.convert_tokens_to_ids("<|im_end|>"), pad_token_id=tok.pad_token_id),
        image_token_index=tok.convert_tokens_to_ids("<image>"), vision_feature_select_strategy="default",
        vision_feature_layer=-1)
    LlavaForConditionalGeneration(cfg).save_pretrained(folder)
    proc.save_pretrained(folder)


@pytest.fixture(scope="session")
def tiny_sd(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cached("sd", tmp_path_factory, build_sd)


@pytest.fixture(scope="session")
def tiny_pix2pix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cached("pix2pix", tmp_path_factory, build_pix2pix)


@pytest.fixture(scope="session")
def tiny_chat_lm(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cached("chat_lm", tmp_path_factory, build_chat_lm)


@pytest.fixture(scope="session")
def tiny_llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return cached("llava", tmp_path_factory, build_llava)
