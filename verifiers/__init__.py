"""Downstream verifiers: every candidate of a study is scored once (see bon.plugins.Verifier)."""

PLUGINS = {
    "synthetic": "verifiers.synthetic:SyntheticVerifier",
    "vqascore": "verifiers.vqascore:VqaScoreVerifier",
    "ocr-text": "verifiers.ocr_text:OcrTextVerifier",
    "gedit": "verifiers.gedit:GEditVerifier",
    "isg": "verifiers.isg:IsgVerifier",
    "emma": "verifiers.emma:EmmaVerifier",
    "labels": "verifiers.labels:LabelsVerifier",
}
