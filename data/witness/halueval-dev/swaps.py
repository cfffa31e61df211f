"""Build swaps.jsonl: python3 data/witness/halueval-dev/swaps.py (from the repository root).

A length-matched development set from the development split: for 54 items whose two answers
differ in length, the right answer is paired with a hallucinated one written by hand within one
word of it — another name (from the passage where it names one of the right kind: the other
kickboxer, the co-star, the father for the mother) or a changed number or date. Each item
keeps its dev.jsonl knowledge, question and right answer; `dev_line` (0-based) and
`alteration` say where it came from and what changed. The fit never reads this file: `svc
witness fit` scores it with the rule fitted without the fold its knowledge falls in (the same
folds as dev.jsonl), so its cross-validated figures are out of sample for the altered answers.
"""
import json, os
HERE = os.path.dirname(os.path.abspath(__file__))

SWAPS = [
 (5, "name", "Peter Aerts"),
 (6, "number", "2008"),
 (7, "number", "6.312 km long"),
 (8, "name", "Germany"),
 (9, "number", "Super Bowl XLIX"),
 (10, "number", "US 64"),
 (11, "number", "2004"),
 (12, "name", "Arizona"),
 (13, "name", "California"),
 (15, "number", "17-year-old"),
 (19, "name", "Jersey City"),
 (21, "name", "Medina, Minnesota, USA"),
 (25, "name", "Magdeburg"),
 (26, "name", "The Unforgettable Fire"),
 (28, "name", "Paul Devereux"),
 (29, "name", "David Blair"),
 (31, "number", "March 28, 1947"),
 (34, "number", "1933"),
 (36, "name", "Comedy Central"),
 (38, "name", "Antony Hamilton"),
 (43, "name", "Paul Dano"),
 (44, "number", "16"),
 (49, "name", "Facelift"),
 (51, "number", "1989"),
 (52, "name", "Seoul Station"),
 (53, "number", "722,466"),
 (54, "name", "Adam Baldwin"),
 (57, "name", "Fenway Park"),
 (63, "number", "249,000"),
 (65, "name", "Greece"),
 (67, "name", "New York"),
 (69, "name", "Natasha Zvereva"),
 (70, "number", "357 mi long"),
 (72, "name", "Scottish"),
 (75, "number", "May 30, 1944"),
 (76, "number", "1975"),
 (78, "name", "Bonn"),
 (83, "name", "Donyell Marshall"),
 (84, "number", "108,942"),
 (85, "name", "François Cluzet"),
 (88, "number", "56,155"),
 (89, "name", "Sam Raimi"),
 (90, "number", "2005"),
 (93, "name", "Second City Television"),
 (96, "name", "Evanescence"),
 (97, "name", "Merrill Hess"),
 (102, "name", "Nassau County"),
 (105, "name", "Arnold Sommerfeld"),
 (109, "name", "Beyoncé"),
 (110, "name", "ABC News"),
 (112, "number", "257 years"),
 (115, "name", "Prince Philip"),
 (117, "name", "Mongolia"),
 (118, "name", "Marvin Hamlisch"),
]

def main():
    with open(os.path.join(HERE, "dev.jsonl"), encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    with open(os.path.join(HERE, "swaps.jsonl"), "w", encoding="utf-8") as out:
        for line, alteration, wrong in SWAPS:
            item = rows[line]
            right = item["right_answer"]
            if abs(len(right.split()) - len(wrong.split())) > 1:
                raise SystemExit(f"line {line}: not length-matched: {right!r} / {wrong!r}")
            out.write(json.dumps({"dev_line": line, "alteration": alteration,
                                  "knowledge": item["knowledge"], "question": item["question"],
                                  "right_answer": right, "hallucinated_answer": wrong},
                                 ensure_ascii=False) + "\n")
    print(len(SWAPS))

if __name__ == "__main__":
    main()
