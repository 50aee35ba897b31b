#!/usr/bin/env bash
# Checks that every relative link in the Markdown files (README.md, docs/, bench/, ...)
# resolves: the file exists and, for a link with #anchor, the target has a heading with
# that GitHub anchor. Links inside code blocks and inline code are ignored, as are
# http(s) and mailto links. Exit 1 with one line per broken link.
#   ./scripts/check-docs.sh            all tracked *.md files
#   ./scripts/check-docs.sh FILE...    only these
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then files=("$@"); else mapfile -t files < <(git ls-files '*.md'); fi

# Links of a file, one "line<TAB>target" per link, outside fenced code and inline code.
links() {
  awk '
    /^[ \t]*```/ { fence = !fence; next }
    fence { next }
    {
      line = $0
      gsub(/`[^`]*`/, "", line)
      while (match(line, /\]\([^) \t]+\)/)) {
        print NR "\t" substr(line, RSTART + 2, RLENGTH - 3)
        line = substr(line, RSTART + RLENGTH)
      }
    }' "$1"
}

# GitHub anchors of a file's headings: lower case, punctuation dropped, spaces to dashes.
anchors() {
  awk '
    /^[ \t]*```/ { fence = !fence; next }
    fence { next }
    /^#+[ \t]/ {
      h = $0
      sub(/^#+[ \t]+/, "", h)
      h = tolower(h)
      gsub(/[^a-z0-9 _-]/, "", h)
      gsub(/ /, "-", h)
      print h
    }' "$1"
}

bad=0
for f in "${files[@]}"; do
  dir=$(dirname "$f")
  while IFS=$'\t' read -r line target; do
    case "$target" in http://*|https://*|mailto:*) continue ;; esac
    path=${target%%#*}
    anchor=""
    [[ "$target" == *"#"* ]] && anchor=${target#*#}
    if [ -z "$path" ]; then dest="$f"; else dest="$dir/$path"; fi
    if [ ! -e "$dest" ]; then
      echo "$f:$line: broken link '$target' (no file $dest)"
      bad=1
      continue
    fi
    if [ -n "$anchor" ] && [ -f "$dest" ]; then
      if ! anchors "$dest" | grep -qxF -- "$anchor"; then
        echo "$f:$line: broken link '$target' (no heading #$anchor in $dest)"
        bad=1
      fi
    fi
  done < <(links "$f")
done
if [ "$bad" = 0 ]; then echo "check-docs: all links resolve (${#files[@]} files)"; fi
exit "$bad"
