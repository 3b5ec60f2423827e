"""Judge plugins speaking the MMRB2 pairwise protocol (see bon.plugins.PairwiseJudge).

A new judge: write ``judges/<name>.py`` with a PairwiseJudge subclass and add one line here.
"""

PLUGINS = {
    # offline synthetic world: genuinely different algorithms, all reading pixels and text
    "scene-full": "judges.synthetic.scene:SceneJudge",
    "scene-lowres": "judges.synthetic.scene:LowResSceneJudge",
    "colour-hist": "judges.synthetic.colour:ColourHistogramJudge",
    "ocr": "judges.synthetic.ocr:OcrJudge",
    "quality": "judges.synthetic.quality:QualityJudge",
    "text-overlap": "judges.synthetic.text_overlap:TextOverlapJudge",
    "position-bias": "judges.synthetic.biased:PositionBiasJudge",
    "image-bias": "judges.synthetic.biased:ImageBiasJudge",
    "random": "judges.synthetic.biased:RandomJudge",
    # real judges: a local chat VLM, any OpenAI-compatible endpoint, reward models (heavy imports are lazy)
    "transformers-vlm": "judges.transformers_vlm:TransformersVlmJudge",
    "openai-compatible": "judges.openai_compatible:OpenAICompatibleJudge",
    "clipscore": "judges.reward_models:ClipScoreJudge",
    "pickscore": "judges.reward_models:PickScoreJudge",
    "vqascore": "judges.reward_models:VqaScoreJudge",
    "reward-model": "judges.reward_models:EntryPointRewardJudge",
}
