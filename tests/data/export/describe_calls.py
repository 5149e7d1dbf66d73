"""Prints what the exported Python package would launch for each call of a file (see
describe_calls.cc, whose output the export test compares with this one's).

    python3 describe_calls.py PACKAGE_PARENT PACKAGE_NAME CALLS_FILE [NUM_SMS]
"""
import importlib
import sys

sys.path.insert(0, sys.argv[1])
package = importlib.import_module(sys.argv[2])
num_sms = int(sys.argv[4]) if len(sys.argv) > 4 else 132
rule = importlib.import_module(sys.argv[2] + "._rule")
with open(sys.argv[3]) as calls:
    for line in calls:
        line = line.strip()
        if not line:
            continue
        b, h, h_kv, s_q, s_kv, d, causal, q, kv, sm = line.split()
        call = {"B": int(b), "H": int(h), "H_kv": int(h_kv), "S_q": int(s_q), "S_kv": int(s_kv),
                "D": int(d), "causal": int(causal), "q_dtype": q, "kv_dtype": kv}
        sys.stdout.write(f"call {line}\n" +
                         rule.describe_call(package.table, call, int(sm), num_sms, 1))
