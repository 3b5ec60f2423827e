"""Judge plugins speaking the MMRB2 pairwise protocol (see bon.protocol.PairwiseJudge).

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
}
