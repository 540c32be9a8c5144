/**
 * Parses JSON as Python's `json` module writes it: diffusers and transformers configs may hold
 * the bare tokens `Infinity`, `-Infinity` and `NaN` (e.g. `"clip_sample_range": Infinity`),
 * which `JSON.parse` refuses. They are read as the JavaScript numbers of the same name.
 */
export function parsePythonJson(text: string): unknown {
  let out = '';
  let inString = false;
  let bare = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (inString) {
      out += c;
      if (c === '\\') {
        out += text[i + 1] ?? '';
        i += 1;
      } else if (c === '"') inString = false;
      continue;
    }
    if (c === '"') {
      inString = true;
      out += c;
      continue;
    }
    const rest = text.slice(i, i + 9);
    if (rest.startsWith('-Infinity')) {
      out += '"\\u0000-Infinity"';
      i += 8;
      bare = true;
    } else if (rest.startsWith('Infinity')) {
      out += '"\\u0000Infinity"';
      i += 7;
      bare = true;
    } else if (rest.startsWith('NaN')) {
      out += '"\\u0000NaN"';
      i += 2;
      bare = true;
    } else out += c;
  }
  if (!bare) return JSON.parse(text) as unknown;
  return JSON.parse(out, (_k, v: unknown) => {
    if (v === '\u0000-Infinity') return -Infinity;
    if (v === '\u0000Infinity') return Infinity;
    if (v === '\u0000NaN') return NaN;
    return v;
  }) as unknown;
}
