#!/usr/bin/env python3
"""Writes a copy of kernel_templates/sdpa_hopper into OUT/sdpa_hopper with some knobs fixed to one
value (KNOB=VALUE ...) and no starting points, for `evo --templates OUT`: a search over the rest."""
import collections, json, os, shutil, sys

out, settings = sys.argv[1], dict(s.split("=") for s in sys.argv[2:])
folder = os.path.join(out, "sdpa_hopper")
shutil.rmtree(folder, ignore_errors=True)
shutil.copytree(os.path.join(os.path.dirname(__file__), "..", "kernel_templates", "sdpa_hopper"), folder)
os.remove(os.path.join(folder, "starting_points.json"))
path = os.path.join(folder, "manifest.json")
manifest = json.load(open(path), object_pairs_hook=collections.OrderedDict)
# deterministic=false: the gates accept a copy whose bits change from call to call (to export
# one and find where); REST=default fixes every knob not named to its default.
if "deterministic" in settings:
    manifest["correctness"]["deterministic"] = settings.pop("deterministic") == "true"
rest_default = settings.pop("REST", None) == "default"
for knob in manifest["knobs"]:
    if knob["name"] in settings:
        knob["values"] = [int(settings.pop(knob["name"]))]
        knob["default"] = knob["values"][0]
    elif rest_default:
        knob["values"] = [knob["default"]]
if settings:
    sys.exit(f"fixed_template: no knob {', '.join(settings)}")
json.dump(manifest, open(path, "w"), indent=2)
