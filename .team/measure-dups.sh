#!/bin/sh
# How issue 11 counts duplicates: copies the non-test Rust sources (no tests/ dirs, no benches, no tests.rs, unit-test modules cut) to /tmp/nt-$$ and lists duplicates.
set -e
out=/tmp/nt-$$; rm -rf $out; mkdir -p $out
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
git ls-files -co --exclude-standard '*.rs' | grep -vE '(^|/)tests/|(^|/)benches/|^bench/' | while read f; do [ -f "$f" ] || continue; mkdir -p $out/$(dirname $f); cp $f $out/$f; done
cd $out && python3 - <<'PY'
import os,re
for root,d,fs in os.walk('.'):
    for f in fs:
        if not f.endswith('.rs'): continue
        p=os.path.join(root,f)
        if f=='tests.rs': os.remove(p); continue
        lines=open(p).read().split('\n')
        for i,l in enumerate(lines):
            if l.strip()=='#[cfg(test)]' and i+1<len(lines) and re.match(r'mod \w+\s*\{',lines[i+1]):
                open(p,'w').write('\n'.join(lines[:i])+'\n'); break
PY
duplicates --repo $out --most 200 --seconds 120
rm -rf $out
