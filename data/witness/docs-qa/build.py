"""Build the documentation question set: python3 build.py CLONES_DIR OUT_DIR.

CLONES_DIR holds clones of requests, flask and fd at the commits the claim set uses (see
../repo-docs/build.py, whose section extraction and commits this reuses, so a section's text is
the same in both sets). Each item is one short-answer question about one documentation
section, with the right answer and a plausible wrong one, hand-written in questions.py by
someone who had not seen the checker. All items go to qa.jsonl: evaluation only.
"""
import importlib.util, json, os, sys

HERE = os.path.dirname(os.path.abspath(__file__))
CLAIMS = os.path.join(HERE, "..", "repo-docs")
sys.path.insert(0, CLAIMS)

# ../repo-docs/build.py by path: this file has the same name.
_spec = importlib.util.spec_from_file_location("claims_build", os.path.join(CLAIMS, "build.py"))
claims_build = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(claims_build)
COMMITS, knowledge = claims_build.COMMITS, claims_build.knowledge
sys.path.insert(0, HERE)
from questions import SECTIONS  # noqa: E402

KINDS = ("name", "number", "yesno", "phrase")


def main(clones, out):
    claims_build.use_clones(clones)
    items = []
    for repo, path, heading, questions in SECTIONS:
        k = knowledge(repo, path, heading)
        if not k:
            sys.exit(f"{repo}:{path}#{heading}: no prose")
        for n, (kind, question, right, wrong) in enumerate(questions, 1):
            if kind not in KINDS:
                sys.exit(f"{repo}:{path}#{heading}/{n}: kind {kind!r} is not one of {KINDS}")
            if right.strip().lower() == wrong.strip().lower():
                sys.exit(f"{repo}:{path}#{heading}/{n}: right and wrong answers are the same")
            items.append({"id": f"{repo}:{path}#{heading}/{n}", "repo": repo, "path": path,
                          "commit": COMMITS[repo], "section": heading, "kind": kind,
                          "knowledge": k, "question": question, "right_answer": right,
                          "hallucinated_answer": wrong})
    with open(os.path.join(out, "qa.jsonl"), "w") as f:
        for item in items:
            f.write(json.dumps(item, ensure_ascii=False) + "\n")
    print("qa", len(items))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
