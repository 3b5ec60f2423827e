"""Generator plugins: each turns a prompt and N seeds into N candidates (see bon.plugins.Generator)."""

PLUGINS = {
    "synthetic": "generators.synthetic.generator:SyntheticGenerator",
    "diffusers-t2i": "generators.diffusers_t2i:DiffusersT2I",
    "diffusers-edit": "generators.diffusers_edit:DiffusersEdit",
    "interleaved": "generators.interleaved:InterleavedAgent",
    "vlm-answers": "generators.vlm_answers:VlmAnswers",
    "openai-images": "generators.openai_images:OpenAIImages",
    "files": "generators.files:FileCandidates",
}
