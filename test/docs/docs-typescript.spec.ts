import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import * as ts from 'typescript';
import { PROBLEMS } from '../../libs/idempotency/src/errors/outcomes';

const ROOT = join(__dirname, '..', '..');
const PAGES = [
  'README.md',
  ...readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .map((name) => `docs/${name}`),
];

/** One ```ts block of a page: where it starts, and what the line before it says it is. */
interface Block {
  page: string;
  line: number;
  code: string;
  /** `<!-- file: src/main.ts -->`: a file of the page's project; `, variant: fastify` replaces it in a second one. */
  file?: string;
  variant?: string;
  /** `<!-- fragment -->`: statements, compiled inside an async function. */
  fragment: boolean;
}

function blocksOf(page: string): Block[] {
  const lines = readFileSync(join(ROOT, page), 'utf8').split('\n');
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)```ts\s*$/.exec(lines[i]);
    if (!open) continue;
    const marker = /^<!--\s*(.*?)\s*-->$/.exec(lines[i - 1]?.trim() ?? '')?.[1] ?? '';
    const file = /^file:\s*([^,\s]+)(?:,\s*variant:\s*(\S+))?$/.exec(marker);
    const start = i + 1;
    while (i + 1 < lines.length && !/^\s*```\s*$/.test(lines[i + 1])) i++;
    const code = lines
      .slice(start, i + 1)
      .map((line) => line.slice(open[1].length))
      .join('\n');
    blocks.push({ page, line: start + 1, code, file: file?.[1], variant: file?.[2], fragment: marker === 'fragment' });
    i++;
  }
  return blocks;
}

/** The sets of files compiled together: each page's project (and each variant of it), each other block alone. */
function compilations(blocks: Block[]): Map<string, { block: Block; source: string }>[] {
  const sets: Map<string, { block: Block; source: string }>[] = [];
  const base = (block: Block) => join(ROOT, 'test', 'docs', 'virtual', block.page.replace(/[/.]/g, '_'));
  for (const page of new Set(blocks.map((block) => block.page))) {
    const files = blocks.filter((block) => block.page === page && block.file);
    const variants = new Set(files.flatMap((block) => (block.variant ? [block.variant] : [])));
    for (const variant of [undefined, ...variants]) {
      const project = new Map<string, { block: Block; source: string }>();
      for (const block of files.filter((candidate) => !candidate.variant)) {
        const replacement = files.find((candidate) => candidate.variant === variant && candidate.file === block.file);
        const chosen = variant && replacement ? replacement : block;
        project.set(join(base(chosen), variant ?? 'main', chosen.file!), { block: chosen, source: chosen.code });
      }
      if (project.size > 0) sets.push(project);
    }
  }
  for (const block of blocks.filter((candidate) => !candidate.file)) {
    const source = block.fragment
      ? `export {};\nasync function fragment(): Promise<void> {\n${block.code}\n}\nvoid fragment;\n`
      : block.code;
    sets.push(new Map([[join(base(block), `line-${block.line}.ts`), { block, source }]]));
  }
  return sets;
}

/**
 * What a Nest 11 CLI app compiles with (CommonJS), what a Nest 12 `nest new` app does (ESM under `nodenext`: relative
 * imports with their `.js`, no `require`), and an ESM app bundled; all with strict checks.
 */
const MODES: Record<'CommonJS' | 'ESM' | 'ESM (nodenext)', ts.CompilerOptions> = {
  CommonJS: {
    module: ts.ModuleKind.CommonJS,
    moduleResolution: ts.ModuleResolutionKind.Node10,
    allowSyntheticDefaultImports: true,
  },
  ESM: { module: ts.ModuleKind.ESNext, moduleResolution: ts.ModuleResolutionKind.Bundler, esModuleInterop: true },
  'ESM (nodenext)': { module: ts.ModuleKind.NodeNext, moduleResolution: ts.ModuleResolutionKind.NodeNext },
};

/** Each set's directory is an app of its own: in `nodenext` mode, a package of `"type": "module"`, as `nest new` makes. */
const ESM_PACKAGE = JSON.stringify({ type: 'module' });

/** Compiles every set, against the built library (`nestjs-dynamodb-idempotency` from node_modules: its .d.ts). */
function diagnostics(sets: Map<string, { block: Block; source: string }>[], mode: keyof typeof MODES): string[] {
  const files = new Map(sets.flatMap((set) => [...set]));
  const options: ts.CompilerOptions = {
    ...MODES[mode],
    target: ts.ScriptTarget.ES2022,
    lib: ['lib.es2022.d.ts'],
    types: ['node'],
    strict: true,
    experimentalDecorators: true,
    emitDecoratorMetadata: true,
    skipLibCheck: true,
    noEmit: true,
    isolatedModules: true,
  };
  const host = ts.createCompilerHost(options);
  const { fileExists, readFile, getSourceFile, directoryExists } = host;
  const esmPackage = (name: string) =>
    mode === 'ESM (nodenext)' &&
    name.endsWith('/package.json') &&
    [...files.keys()].some((file) => file.startsWith(name.slice(0, -'package.json'.length)));
  host.fileExists = (name) => files.has(name) || esmPackage(name) || fileExists(name);
  host.directoryExists = (name) =>
    [...files.keys()].some((file) => file.startsWith(`${name}/`)) || (directoryExists?.(name) ?? false);
  host.readFile = (name) => files.get(name)?.source ?? (esmPackage(name) ? ESM_PACKAGE : readFile(name));
  host.getSourceFile = (name, version, ...rest) =>
    files.has(name)
      ? ts.createSourceFile(name, files.get(name)!.source, version)
      : getSourceFile(name, version, ...rest);
  // One program: each set has a directory of its own, so a page's project sees its own files and nothing else.
  return ts
    .getPreEmitDiagnostics(ts.createProgram([...files.keys()], options, host))
    .filter((diagnostic) => diagnostic.file && files.has(diagnostic.file.fileName))
    .map((diagnostic) => {
      const { block } = files.get(diagnostic.file!.fileName)!;
      const { line } = diagnostic.file!.getLineAndCharacterOfPosition(diagnostic.start ?? 0);
      const where = `${block.page}:${block.line + line - (block.fragment ? 2 : 0)}`;
      return `${mode} ${where} (${relative(ROOT, diagnostic.file!.fileName)}): ${ts.flattenDiagnosticMessageText(diagnostic.messageText, '\n')}`;
    });
}

describe('the documentation', () => {
  const blocks = PAGES.flatMap(blocksOf);
  const sets = compilations(blocks);

  beforeAll(() => {
    // The blocks are checked against the library as users get it: its declarations, built.
    execFileSync(process.execPath, [join(ROOT, 'scripts/build.mjs'), 'lib'], { cwd: ROOT, stdio: 'pipe' });
  }, 120_000);

  it('has TypeScript examples in the README and the docs, each a module (or a marked file or fragment)', () => {
    expect(blocks.filter((block) => block.page === 'README.md').length).toBeGreaterThanOrEqual(5);
    expect(new Set(blocks.map((block) => block.page)).size).toBeGreaterThanOrEqual(10);
    for (const block of blocks.filter((candidate) => !candidate.fragment)) {
      expect({ where: `${block.page}:${block.line}`, module: /^(import|export) /m.test(block.code) }).toEqual({
        where: `${block.page}:${block.line}`,
        module: true,
      });
    }
  });

  it.each(Object.keys(MODES) as (keyof typeof MODES)[])(
    'every TypeScript block compiles as %s against the built library',
    (mode) => {
      expect(diagnostics(sets, mode)).toEqual([]);
    },
  );

  it('keeps the README short: at most 350 lines', () => {
    expect(readFileSync(join(ROOT, 'README.md'), 'utf8').trimEnd().split('\n').length).toBeLessThanOrEqual(350);
  });

  it('links every page of docs/ from the README, and speaks of the project, not of its tracker', () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const pages = readdirSync(join(ROOT, 'docs')).filter((name) => name.endsWith('.md'));
    expect(pages.filter((page) => !readme.includes(`(docs/${page}`))).toEqual([]);
    const tracker = /\bissues? (#?\d+)/i;
    const mentions = ['README.md', ...pages.map((page) => `docs/${page}`)].flatMap((page) =>
      readFileSync(join(ROOT, page), 'utf8')
        .split('\n')
        .filter((line) => tracker.test(line))
        .map((line) => `${page}: ${line.trim()}`),
    );
    expect(mentions).toEqual([]);
  });

  it("lists every problem of the outcome table in the README's HTTP outcomes, with its status", () => {
    const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
    const table = readme.slice(
      readme.indexOf('## HTTP outcomes'),
      readme.indexOf('\n## ', readme.indexOf('## HTTP outcomes') + 1),
    );
    const rows = table.split('\n').filter((line) => line.startsWith('|'));
    for (const [outcome, { slug, status }] of Object.entries(PROBLEMS)) {
      const row = rows.find((line) => line.includes(`\`${slug}\``));
      expect({ outcome, slug, status: row?.split('|').map((cell) => cell.trim())[2] }).toEqual({
        outcome,
        slug,
        status: String(status),
      });
    }
  });
});
