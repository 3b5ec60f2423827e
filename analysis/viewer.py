"""``bon view``: every MMRB2 pair and every Best-of-N match of a study, both orders side by side.

One static page (``view.html``): per preference pair of the run's ``mmrb2/`` set and per knockout or
round-robin match of ``picks.jsonl``, both candidates side by side with the judge's forward and reverse
verdicts, scores and reasons, filterable by judge, task, kind and "orders disagree" (the two orders name
different candidates). Pair verdicts come from the official-format judgment files under
``mmrb2/judgments/``; a match's verdicts are not in the picks (they record who met whom and who won), so
they are read from ``judgments.sqlite`` by the keys the referee stored them under: the judge's identity
hash and the content hashes of the prompt and of the response shown as A and as B.

The page opens at any size: ``view.html`` holds only an index (judges, tasks, and per shard its kind,
task, judge and counts) in a ``<script type="application/json">`` block; the items live in shards of at
most :data:`SHARD_ITEMS` items of one kind, task and judge under ``view-data/`` beside it, each a
``<script>`` file (a page opened from disk cannot ``fetch()`` a JSON file in Chromium, but it can load a
script) that the page adds when a filter needs its items, so the first page reads the index and a shard
or two whatever the study's size. Every text is rendered with ``textContent``, JSON is escaped for a
script (``<``, ``>``, ``&``), and images load by relative path from the page's folder; the page references
no network resource (its content security policy forbids them). The URL fragment sets the filters:
``view.html#judge=ocr&task=t2i&kind=pair&disagree=1``.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any, Mapping
from urllib.parse import quote

from bon.backends.images import check_image_header
from bon.content import Content, ImageItem
from bon.errors import BonError
from bon.run import Run, as_run, reason
from bon.runfolder import RunFolder, write_text
from bon.tasks import TASKS

SHARD_ITEMS = 100  # items per shard file (tens of kB): the first page (40 cards) needs one, at any size
SHARDS = "view-data"  # the shards' folder beside view.html
SHARD_CALL = "bonViewShard"  # what each shard file calls with its items


def view_data(run: Run | Path, out_dir: Path) -> dict[str, Any]:
    """What the page shows: one item per judge and pair or match, paths relative to ``out_dir``."""
    run = as_run(run)
    page = _Contents(Path(out_dir))
    items = pair_items(run, page) + match_items(run, page)
    if not items:
        raise BonError(f"{run.root}: no preference pairs with judgment files and no picks with matches to show")
    judges = list(dict.fromkeys(i["judge"] for i in items))
    tasks = [t for t in (t.name for t in TASKS) if any(i["task"] == t for i in items)]
    return {"run": str(run.root), "judges": judges, "tasks": tasks, "contents": page.table, "items": items}


def packed(data: Mapping[str, Any]) -> dict[str, Any]:
    """A shard's compact form: its contents by number, every repeated string (reasons, notes, labels) once
    in ``strings``, each item a short list, so a thousand verdicts stay a few hundred kB."""
    strings: dict[str, int] = {}
    keys = {k: i for i, k in enumerate(data["contents"])}

    def s(value: Any) -> int:
        return strings.setdefault("" if value is None else str(value), len(strings))

    def order(v: Mapping[str, Any]) -> list[Any]:
        return [v["v"], v["score"], s(v["reason"])]

    items = [[it["kind"], it["task"], it["judge"], it["id"], it.get("generator", ""), keys[it["prompt"]], keys[it["a"]],
              keys[it["b"]], s(it["labels"][0]), s(it["labels"][1]), s(it["note"]), it["best"], order(it["fwd"]),
              order(it["rev"]), int(it["disagree"])] for it in data["items"]]
    return {"judges": data["judges"], "tasks": data["tasks"], "contents": list(data["contents"].values()),
            "strings": list(strings), "items": items}




class _Contents:
    """Contents shown on the page, each stored once under a key, images as relative URLs."""

    def __init__(self, out_dir: Path):
        self.out = out_dir.resolve()
        self.table: dict[str, list[list[str]]] = {}

    def add(self, key: str, content: Content) -> str:
        if key not in self.table:
            self.table[key] = [["image", self.url(it.path)] if isinstance(it, ImageItem) else ["text", it.text]
                               for it in content]
        return key

    def url(self, path: Path | None) -> str:
        """The image's relative URL, once its header passed the checks a decoding reader makes (the browser
        decodes it: a decompression bomb or a file that is no image is refused here, in one line)."""
        if path is None:
            return ""
        check_image_header(Path(path), str(path))
        rel = os.path.relpath(Path(path).resolve(), self.out)
        return quote(Path(rel).as_posix())  # a relative URL: no scheme, special characters escaped


def verdict(entry: Any) -> dict[str, Any]:
    """One order's first sample as shown: letter ("" when missing), 1-6 score and the judge's reason."""
    first = entry[0] if isinstance(entry, list) and entry else entry if isinstance(entry, Mapping) else None
    if not isinstance(first, Mapping):
        return {"v": "", "score": None, "reason": "not asked"}
    meta = dict(first.get("metadata") or {})
    letter = first.get("judgement") if first.get("judgement") in ("A", "B") else ""
    return {"v": letter, "score": meta.pop("score", None), "reason": reason(meta, first.get("judgement"))}


def _disagree(fwd: Mapping[str, Any], rev: Mapping[str, Any]) -> bool:
    """Both orders answered and name different candidates (the same letter is the other candidate in reverse)."""
    return bool(fwd["v"] and rev["v"] and fwd["v"] == rev["v"])


def pair_items(run: Run, page: _Contents) -> list[dict[str, Any]]:
    """One item per judge and preference pair of the run's own MMRB2-format set."""
    from bon.stages.judge_bench import pair_comparisons

    items, bench = [], run.folder.mmrb2
    for task in TASKS:
        file = bench / task.file
        if not file.exists():
            continue
        pairs = run.pairs(file)
        folders = sorted(f for f in (bench / "judgments").glob("*") if (f / task.file).exists())
        for folder in folders:
            judgments = run.judgments(folder / task.file)
            for pair in pairs:
                entry = judgments.get(pair.id)
                if not isinstance(entry, Mapping):
                    continue
                comp = pair_comparisons(pair, task.name, bench, 1)[0]
                fwd, rev = verdict(entry.get("forward")), verdict(entry.get("reverse"))
                items.append({
                    "kind": "pair", "task": task.name, "judge": _evaluator(entry, folder.name), "id": pair.id,
                    "prompt": page.add(f"pair:{pair.id}:prompt", comp.prompt.content),
                    "a": page.add(f"pair:{pair.id}:a", comp.a), "b": page.add(f"pair:{pair.id}:b", comp.b),
                    "labels": [f"response_a ({pair.model_a})", f"response_b ({pair.model_b})"],
                    "note": f"annotators chose {'response_a' if pair.chosen == 'A' else 'response_b'}",
                    "best": 0 if pair.chosen == "A" else 1, "fwd": fwd, "rev": rev, "disagree": _disagree(fwd, rev)})
    return items


def _evaluator(entry: Mapping[str, Any], folder: str) -> str:
    """The judge's name as its judgment file records it (the folder name is a slug of it)."""
    for order in ("forward", "reverse"):
        first = entry.get(order)
        if isinstance(first, list) and first and isinstance(first[0], Mapping) and first[0].get("evaluator"):
            return str(first[0]["evaluator"])
    return folder


def match_items(run: Run, page: _Contents) -> list[dict[str, Any]]:
    """One item per match of ``picks.jsonl``, its verdicts read from the judgment store (keyed on the
    candidates' recorded digests: no image is decoded for them, see :meth:`bon.run.Run.match_verdicts`)."""
    if not run.folder.picks.exists():
        return []
    picks = [p for p in run.pick_records if p.get("matches")]
    if not picks:
        return []
    prompts = run.prompt_objects
    scores = run.score_records if run.folder.scores.exists() else {}
    plan, verdicts = run.match_verdicts(picks)
    none = {"v": "", "score": None, "reason": "not in the judgment store"}
    items = []
    for pick, keys in plan:
        gen, pid = pick["generator"], pick["prompt_id"]
        prompt, cands = prompts.get(pid), run.candidate_objects(gen).get((gen, pid), {})
        for x, y, winner, how, fwd_key, rev_key in keys:
            if prompt is None or x not in cands or y not in cands:
                continue
            fwd, rev = verdicts.get(fwd_key, none), verdicts.get(rev_key, none)
            items.append({
                "kind": "match", "task": pick["task"], "judge": pick["judge"], "id": pid, "generator": gen,
                "prompt": page.add(f"prompt:{pid}", prompt.content),
                "a": page.add(f"cand:{gen}:{pid}:{x}", cands[x].content),
                "b": page.add(f"cand:{gen}:{pid}:{y}", cands[y].content),
                "labels": [_candidate_label(gen, pid, x, scores), _candidate_label(gen, pid, y, scores)],
                "note": (f"winner: candidate {winner}" if winner is not None else "no winner recorded")
                        + (f" ({how})" if how else ""),
                "best": 0 if winner == x else 1 if winner == y else None, "fwd": fwd, "rev": rev,
                "disagree": _disagree(fwd, rev)})
    return items


def _candidate_label(gen: str, pid: str, index: int, scores: Mapping[tuple, Mapping[str, Any]]) -> str:
    score = (scores.get((gen, pid, index)) or {}).get("score")
    return f"candidate {index} of {gen}" + (f" (verifier {float(score):.3f})" if score is not None else "")


def script_json(data: Any) -> str:
    """JSON safe inside ``<script>``: no ``<``, ``>``, ``&`` or line separators that could end or bend it."""
    text = json.dumps(data, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    for ch, esc in (("<", "\\u003c"), (">", "\\u003e"), ("&", "\\u0026"), ("\u2028", "\\u2028"), ("\u2029", "\\u2029")):
        text = text.replace(ch, esc)
    return text


def shards(data: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The items split by kind, task and judge (in the order the page lists them), at most
    :data:`SHARD_ITEMS` each; every shard packed with only the contents its items show."""
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for item in data["items"]:
        groups.setdefault((item["kind"], item["task"], item["judge"]), []).append(item)
    out = []
    for (kind, task, judge), items in groups.items():
        for start in range(0, len(items), SHARD_ITEMS):
            chunk = items[start:start + SHARD_ITEMS]
            used = dict.fromkeys(k for it in chunk for k in (it["prompt"], it["a"], it["b"]))
            out.append({"kind": kind, "task": task, "judge": judge, "count": len(chunk),
                        "disagree": sum(bool(it["disagree"]) for it in chunk),
                        "data": packed({"judges": [], "tasks": [], "items": chunk,
                                        "contents": {k: data["contents"][k] for k in used}})})
    return out


def write_viewer(run: Run | Path, out_dir: Path | None = None) -> tuple[Path, dict[str, Any]]:
    """Write ``view.html`` (the index) and its shards under ``view-data/`` into ``out_dir`` (default: the run
    folder); returns the page's path and the data shown. The shards are written first and the page last,
    and each shard names the build it belongs to, so a page never shows a shard of another build."""
    run = as_run(run)
    data = view_data(run, Path(out_dir or run.root))  # read everything before a folder is made
    out = RunFolder(Path(out_dir or run.root))
    parts = shards(data)
    texts = [script_json(part.pop("data")) for part in parts]
    build = hashlib.sha256("\n".join(texts).encode("utf-8")).hexdigest()[:16]
    folder = out.viewer.parent / SHARDS
    names = [f"{i:05d}.js" for i in range(len(parts))]
    for name, text in zip(names, texts):
        write_text(folder / name, f'{SHARD_CALL}({json.dumps(name)},"{build}",{text});\n')
    for stale in sorted(folder.glob("*.js")) if folder.is_dir() else []:
        if stale.name not in names:  # a shard of an earlier, larger build
            stale.unlink()
    groups: dict[tuple[str, str, str], list[int]] = {}
    for part in parts:  # one entry per kind, task and judge, whatever the study's size: the page stays one size
        group = groups.setdefault((part["kind"], part["task"], part["judge"]), [0, 0])
        group[0] += part["count"]
        group[1] += part["disagree"]
    index = {"run": str(run.root), "build": build, "judges": data["judges"], "tasks": data["tasks"], "total": len(data["items"]),
             "per": SHARD_ITEMS, "groups": [[*key, *counts] for key, counts in groups.items()]}
    write_text(out.viewer, PAGE.replace("/*DATA*/", script_json(index)))
    return out.viewer, data


def read_index(page: Path) -> dict[str, Any]:
    """A written page's index: judges, tasks, total, per kind, task and judge its items and disagreeing ones
    (``groups``), and per shard (as the page numbers them) [path, kind, task, judge, items]."""
    import re

    html = Path(page).read_text(encoding="utf-8")
    index = json.loads(re.search(r'<script type="application/json" id="data">(.*?)</script>', html, re.S).group(1))
    index["shards"] = []
    for kind, task, judge, count, _ in index["groups"]:
        for start in range(0, count, index["per"]):
            index["shards"].append([f"{SHARDS}/{len(index['shards']):05d}.js", kind, task, judge, min(index["per"], count - start)])
    return index


def read_shards(page: Path) -> dict[str, Any]:
    """A written page's index and every shard's packed data, in order (for checks and tools; a browser loads
    them one at a time)."""
    index, found = read_index(page), []
    for path, *_ in index["shards"]:
        text = (Path(page).parent / path).read_text(encoding="utf-8")
        found.append(json.loads(text[text.index(",", text.index(",") + 1) + 1:text.rindex(")")]))
    return {"index": index, "shards": found}


PAGE = """<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; img-src 'self' file: data:; style-src 'unsafe-inline'; script-src 'unsafe-inline' 'self' file:">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>bon view: pairs and matches, both orders</title>
<style>
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Arial,sans-serif;color:#1b1f24}
header{position:sticky;top:0;background:#f6f8fa;border-bottom:1px solid #d8dde3;padding:10px 20px;z-index:2}
header label{margin-right:14px}main{padding:12px 20px 60px;max-width:1300px}
.card{border:1px solid #d8dde3;border-radius:8px;padding:10px 12px;margin:12px 0}
.card.disagree{border-color:#9a5b00;box-shadow:0 0 0 1px #9a5b00 inset}
.head{font-weight:600}.head .tag{font-weight:400;background:#e6eef7;border-radius:9px;padding:0 7px;margin-left:6px;font-size:12px}
.prompt{white-space:pre-wrap;margin:6px 0;color:#333}.side{display:flex;gap:12px}
.cand{flex:1;border:1px solid #e3e6ea;border-radius:6px;padding:6px;min-width:0}.cand.best{border-color:#0f6b3a}
.cand .label{font-size:12px;color:#5b6470;margin-bottom:4px}.cand .text{white-space:pre-wrap;max-height:220px;overflow:auto}
img{max-width:100%;max-height:260px;display:block;margin:2px 0}
table{border-collapse:collapse;margin-top:8px;font-size:12.5px;width:100%}
th,td{border-bottom:1px solid #e3e6ea;padding:3px 6px;text-align:left;vertical-align:top}
td.reason{white-space:pre-wrap;color:#333}.muted{color:#5b6470}
</style></head><body>
<header>
<label>kind <select id="f-kind"><option value="">all</option><option value="pair">MMRB2 pairs</option><option value="match">Best-of-N matches</option></select></label>
<label>judge <select id="f-judge"><option value="">all</option></select></label>
<label>task <select id="f-task"><option value="">all</option></select></label>
<label><input type="checkbox" id="f-disagree"> orders disagree</label>
<label>id <input id="f-id" placeholder="pair or prompt id" size="18"></label>
<span id="count" class="muted"></span>
</header>
<main><div id="cards"></div><button id="more" type="button">show more</button></main>
<script type="application/json" id="data">/*DATA*/</script>
<script>
(function(){
  "use strict";
  var index=JSON.parse(document.getElementById("data").textContent), loaded={}, pending={}, failed={};
  function unpack(raw){
    var S=raw.strings;
    function verdict(o){return {v:o[0],score:o[1],reason:S[o[2]]};}
    return raw.items.map(function(r){
      return {kind:r[0],task:r[1],judge:r[2],id:r[3],generator:r[4],prompt:raw.contents[r[5]],a:raw.contents[r[6]],b:raw.contents[r[7]],
              labels:[S[r[8]],S[r[9]]],note:S[r[10]],best:r[11],fwd:verdict(r[12]),rev:verdict(r[13]),disagree:r[14]===1};});
  }
  index.shards=[];index.groups.forEach(function(g){
    for(var i=0;i<Math.ceil(g[3]/index.per);i++){var n=String(index.shards.length);while(n.length<5)n="0"+n;
      index.shards.push(["view-data/"+n+".js",g[0],g[1],g[2],Math.min(index.per,g[3]-i*index.per),i===0?g[4]:0,g[4]]);}
  });
  window.bonViewShard=function(name,build,raw){if(build===index.build)loaded[index.dir+name]=unpack(raw);};
  index.dir="view-data/";
  function load(path){
    if(loaded[path]||pending[path]||failed[path])return;
    pending[path]=true;var sc=document.createElement("script");sc.src=path;
    sc.onload=function(){delete pending[path];if(!loaded[path])failed[path]="of another build";render();};
    sc.onerror=function(){delete pending[path];failed[path]="missing";render();};
    document.head.appendChild(sc);
  }
  var PAGE=40, shown=PAGE, f={kind:"",judge:"",task:"",disagree:false,id:""};
  function el(tag,cls,text){var e=document.createElement(tag);if(cls)e.className=cls;if(text!==undefined&&text!==null)e.textContent=String(text);return e;}
  function options(id,values){var s=document.getElementById(id);values.forEach(function(v){var o=el("option","",v);o.value=v;s.appendChild(o);});}
  function safeUrl(u){return typeof u==="string"&&u!==""&&!/^[a-z][a-z0-9+.-]*:/i.test(u)&&u.indexOf("//")!==0;}
  function content(box,items){
    (items||[]).forEach(function(item){
      if(item[0]==="image"){if(safeUrl(item[1])){var img=el("img");img.alt="image";img.src=item[1];box.appendChild(img);}}
      else box.appendChild(el("div","text",item[1]));
    });
  }
  function order(tr,label,shownA,v,names){
    tr.appendChild(el("td","",label));tr.appendChild(el("td","",shownA));
    tr.appendChild(el("td","verdict",v.v||"missing"));tr.appendChild(el("td","",v.v?names:"–"));
    tr.appendChild(el("td","",v.score===null||v.score===undefined?"–":v.score));tr.appendChild(el("td","reason",v.reason||""));
  }
  function card(it){
    var c=el("div","card"+(it.disagree?" disagree":""));c.setAttribute("data-kind",it.kind);
    var h=el("div","head",(it.kind==="pair"?"MMRB2 pair ":"Best-of-N match, prompt ")+it.id);
    [it.task,it.judge,it.generator,it.disagree?"orders disagree":null].forEach(function(t){if(t)h.appendChild(el("span","tag",t));});
    c.appendChild(h);
    var p=el("div","prompt");content(p,it.prompt);c.appendChild(p);
    var side=el("div","side");
    [it.a,it.b].forEach(function(key,i){var box=el("div","cand"+(it.best===i?" best":""));box.appendChild(el("div","label",(i?"B in forward: ":"A in forward: ")+it.labels[i]));content(box,key);side.appendChild(box);});
    c.appendChild(side);c.appendChild(el("div","muted",it.note));
    var t=el("table"),hr=el("tr");["order","shown as A","verdict","names","score (1-6)","reason"].forEach(function(x){hr.appendChild(el("th","",x));});t.appendChild(hr);
    var fw=el("tr","order forward"),rv=el("tr","order reverse");
    order(fw,"forward",it.labels[0],it.fwd,it.fwd.v==="A"?it.labels[0]:it.labels[1]);
    order(rv,"reverse",it.labels[1],it.rev,it.rev.v==="A"?it.labels[1]:it.labels[0]);
    t.appendChild(fw);t.appendChild(rv);c.appendChild(t);return c;
  }
  function keep(it){return (!f.kind||it.kind===f.kind)&&(!f.judge||it.judge===f.judge)&&(!f.task||it.task===f.task)&&(!f.disagree||it.disagree)&&(!f.id||it.id.toLowerCase().indexOf(f.id.toLowerCase())>=0);}
  /* sh: [path, kind, task, judge, items, the group's disagreeing items on its first shard, the group's] */
  function wanted(sh){return (!f.kind||sh[1]===f.kind)&&(!f.task||sh[2]===f.task)&&(!f.judge||sh[3]===f.judge)&&(!f.disagree||sh[6]>0);}
  function render(){
    var box=document.getElementById("cards");box.textContent="";
    var hits=[],known=0,open=false,bad=[];
    index.shards.filter(wanted).forEach(function(sh){
      known+=f.disagree?sh[5]:sh[4];
      if(failed[sh[0]]){bad.push(sh[0]+" ("+failed[sh[0]]+")");return;}
      if(open||(hits.length>=shown&&!f.id))return;  /* one shard at a time, in the page's order */
      if(!loaded[sh[0]]){open=true;load(sh[0]);return;}
      loaded[sh[0]].forEach(function(it){if(keep(it))hits.push(it);});
    });
    hits.slice(0,shown).forEach(function(it){box.appendChild(card(it));});
    var total=f.id?(open?"at least "+hits.length:String(hits.length)):String(known);
    document.getElementById("count").textContent=(open&&hits.length<shown?"loading: ":"")+"showing "+Math.min(shown,hits.length)+" of "+total+" ("+index.total+" in all)"+(bad.length?"; unreadable shards: "+bad.join(", "):"");
    document.getElementById("more").style.display=(f.id?hits.length>shown:known>shown)?"":"none";
  }
  function fromHash(){
    var q={};location.hash.replace(/^#/,"").split("&").forEach(function(kv){if(!kv)return;var i=kv.indexOf("=");q[decodeURIComponent(i<0?kv:kv.slice(0,i))]=i<0?"":decodeURIComponent(kv.slice(i+1));});
    f.kind=q.kind||"";f.judge=q.judge||"";f.task=q.task||"";f.disagree=q.disagree==="1";f.id=q.id||"";
    document.getElementById("f-kind").value=f.kind;document.getElementById("f-judge").value=f.judge;
    document.getElementById("f-task").value=f.task;document.getElementById("f-disagree").checked=f.disagree;document.getElementById("f-id").value=f.id;
  }
  options("f-judge",index.judges);options("f-task",index.tasks);
  ["f-kind","f-judge","f-task","f-disagree","f-id"].forEach(function(id){
    document.getElementById(id).addEventListener(id==="f-id"?"input":"change",function(e){
      var t=e.target;f[id.slice(2)]=t.type==="checkbox"?t.checked:t.value;shown=PAGE;render();});
  });
  document.getElementById("more").addEventListener("click",function(){shown+=PAGE;render();});
  fromHash();render();
})();
</script></body></html>
"""
