# Sourced by scripts/setup_vllm.sh and scripts/setup_sglang.sh: one cached virtual
# environment with an engine's wheel installed --no-deps next to a pinned list of what the
# plug-in tests import (the engines' full requirements pull CUDA builds, gigabytes).
#
# engine_venv NAME VENV REQUIREMENTS  (the import check, Python, on stdin)
# Cached outside the clone: while REQUIREMENTS' digest matches the stamp in VENV, it returns
# at once; else VENV is made anew, the list installed, the check run, the stamp written.
engine_venv() {
    local name=$1 venv=$2 reqs=$3
    local stamp="$venv/.autoparser-stamp" want check
    want=$(sha256sum "$reqs" | cut -d' ' -f1)
    check=$(cat)
    if [ -x "$venv/bin/python" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
        echo "$name: cached environment in $venv ($(grep "^$name==" "$reqs"))"
        return 0
    fi
    rm -rf "$venv"
    "${PYTHON:-python3}" -m venv "$venv"
    # (pip's notes about the machine's unused local index folders are left out of the log)
    "$venv/bin/python" -m pip install --quiet --no-deps -r "$reqs" 2>&1 | { grep -v "is ignored" || true; }
    "$venv/bin/python" -c "$check"
    echo "$want" >"$stamp"
    echo "$name: installed $(grep "^$name==" "$reqs") in $venv"
}
