#!/usr/bin/python3
"""make_csv.py — writes houses.csv, the example regression table of the README
(`gpurun data csv`): 200 synthetic houses, four features and the price as the
target, a known linear function plus Gaussian noise:

    price_k = 50 + 2.0 area_m2 + 10 rooms - 0.8 age_years - 5 distance_km + N(0, 10)

Python's own random.Random(SEED) (Mersenne Twister), so the file is the same on
every run and machine. Usage: make_csv.py [OUT.csv] (default: houses.csv next to it)."""
import os
import random
import sys

SEED = 24
ROWS = 200


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "houses.csv")
    rng = random.Random(SEED)
    lines = ["area_m2,rooms,age_years,distance_km,price_k"]
    for _ in range(ROWS):
        area = rng.uniform(30.0, 200.0)
        rooms = rng.randint(1, 6)
        age = rng.uniform(0.0, 80.0)
        dist = rng.uniform(0.5, 30.0)
        price = 50 + 2.0 * area + 10 * rooms - 0.8 * age - 5 * dist + rng.gauss(0.0, 10.0)
        lines.append(f"{area:.1f},{rooms},{age:.1f},{dist:.2f},{price:.2f}")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
