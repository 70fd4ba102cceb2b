#!/usr/bin/env bash
# Parses every tracked Python and shell script without running it, so that a script broken in
# an edit (a C++ formatter run over a .py file, say) fails here in seconds instead of failing,
# one test at a time, the suites that start it at the end of the test command.
# Prints each script that does not parse and exits 1; exits 0 when all do.
#   bash scripts/check-scripts.sh [ROOT]   (default: the repository)
set -euo pipefail
root=${1:-"$(cd "$(dirname "$0")/.." && pwd)"}
cd "$root"
status=0
while IFS= read -r -d '' script; do
    case "$script" in
    *.py) python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' \
              "$script" || status=1 ;;
    *.sh) bash -n "$script" || status=1 ;;
    esac
done < <(if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    git ls-files -z -- '*.py' '*.sh'
else  # a tree without its git metadata (an exported source tarball)
    find . -path ./build -prune -o -type f \( -name '*.py' -o -name '*.sh' \) -print0
fi)
exit "$status"
