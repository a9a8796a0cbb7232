#!/usr/bin/env bash
# pyenv.sh: a Python venv with redis-py for the proxy's client tests
# (proxy/testdata/compat.py). Idempotent; prints the venv's python.
#   ${HOTSPOT_STACK_DIR:-<repo>/.stack}/pyenv, redis-py from PyPI.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
dir=${HOTSPOT_STACK_DIR:-$here/.stack}/pyenv
py=${PYTHON:-python3}
if [[ ! -x $dir/bin/python ]] || ! "$dir/bin/python" -c 'import redis' 2>/dev/null; then
	mkdir -p "$(dirname "$dir")"
	"$py" -m venv "$dir" >&2
	"$dir/bin/pip" install --quiet --disable-pip-version-check 'redis>=5,<7' >&2
fi
echo "$dir/bin/python"
