// The workspace tree the MCP interop tests start from.

import { mkdirSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'

/** The fixture every MCP interop test starts from. */
export function writeFixture(root) {
  const files = {
    'a.txt': 'line1\nline2\nline3\n',
    'b.txt': 'no newline',
    'edit.txt': 'alpha\nbeta\ngamma\ndelta\nepsilon\nzeta\neta\ntheta\niota\nkappa\n',
    'dup.txt': 'foo\nfoo\nbar\n',
    'img.png': Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 1, 2, 3]),
    'sub/s.txt': 'hello sub\n',
    'sub/deep/d.md': 'deep\n',
    'users/u1/f.txt': 'u1 secret\n',
    'users/u2/secret.txt': 'u2 secret\n',
    'big.txt': Array.from({ length: 1500 }, (_, i) => String(i + 1)).join('\n') + '\n',
  }
  for (const [p, c] of Object.entries(files)) {
    mkdirSync(join(root, p, '..'), { recursive: true })
    writeFileSync(join(root, p), c)
  }
}

