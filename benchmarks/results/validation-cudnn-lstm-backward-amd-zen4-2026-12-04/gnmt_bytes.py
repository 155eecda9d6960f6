import sys, collections
sys.path.insert(0, "benchmarks/validation")
import composition_fit as cf
from ampgan.bench.ops import FUSED_UPDATES
rows, _ = cf.load_rows(cf.ROWS)
for r in rows:
    if r.model == "gnmt" and r.gpu.key == "V100" and r.batch == (128, 128):
        for side, (table, batch, prec) in zip(("fp32", "amp"), r.sides):
            by = collections.Counter(); n = collections.Counter()
            for row in table:
                if row.unit == "matrix": continue
                by[(row.op, row.dtype)] += row.bytes_at(batch) * row.weight / 1e9
                n[(row.op, row.dtype)] += row.weight
            tot = sum(by.values())
            print(side, prec, f"total GB {tot:.1f}")
            for k, v in by.most_common(12): print("   ", k, f"{v:.2f} GB", int(n[k]))
        break
