/**
 * The page's one stylesheet. Colour only repeats what the text already says (✓/✗, SENT/DENY,
 * the bar's figure beside it), so the page reads the same in grey print. Print opens every
 * disclosure; the phone layout stacks what sits side by side.
 */
export const STYLES = `
:root {
  --ink: #1b1f24; --muted: #4f5863; --line: #d4d8dd; --paper: #ffffff; --ground: #f4f5f7;
  --ok: #1d6b3f; --ok-ground: #e8f4ec; --fail: #a4221a; --fail-ground: #fdecea;
  --before: #8a5300; --after: #1d6b3f; --accent: #2a4f8f;
  color-scheme: light;
}
* { box-sizing: border-box; }
html { -webkit-text-size-adjust: 100%; }
body {
  margin: 0; background: var(--ground); color: var(--ink);
  font: 16px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "DejaVu Sans", sans-serif;
}
main { max-width: 66rem; margin: 0 auto; padding: 2rem 1.25rem 3rem; }
h1, h2, h3 { line-height: 1.15; margin: 0 0 .75rem; }
h1 { font-size: clamp(2.2rem, 7vw, 3.6rem); letter-spacing: -0.02em; }
h2 { font-size: clamp(1.5rem, 4vw, 2.1rem); }
h3 { font-size: 1.15rem; }
p { margin: 0 0 .9rem; }
code, pre, .tag { font-family: ui-monospace, "SFMono-Regular", Menlo, Consolas, "DejaVu Sans Mono", monospace; font-size: .88em; }
a { color: var(--accent); }
:focus-visible { outline: 3px solid var(--accent); outline-offset: 2px; }
.kicker { text-transform: uppercase; letter-spacing: .08em; font-size: .78rem; font-weight: 600; color: var(--muted); margin-bottom: .4rem; }
section { margin-top: 3rem; }
.hero .lede { font-size: 1.15rem; max-width: 44rem; color: var(--muted); }
.meta { font-size: .88rem; color: var(--muted); margin-top: 1rem; }
.stats { list-style: none; padding: 0; margin: 1.5rem 0 0; display: grid; grid-template-columns: repeat(3, 1fr); gap: 1rem; }
.stats li { background: var(--paper); border: 1px solid var(--line); border-radius: .5rem; padding: 1rem 1.1rem; color: var(--muted); }
.stats strong { display: block; font-size: 2.8rem; line-height: 1.1; color: var(--ink); font-variant-numeric: tabular-nums; }
.stats sup a { text-decoration: none; padding: 0 .2rem; }
.summary { border-radius: .5rem; padding: .75rem 1rem; margin: 1.25rem 0 0; font-weight: 600; }
.summary p, .summary ul { margin: 0; }
.summary.ok { background: var(--ok-ground); border-left: .4rem solid var(--ok); color: var(--ok); }
.summary.fail { background: var(--fail-ground); border: 3px dashed var(--fail); color: var(--fail); }
.summary.fail ul { margin-top: .4rem; padding-left: 1.4rem; font-weight: 400; }
.case-grid { display: grid; grid-template-columns: repeat(auto-fit, minmax(min(100%, 28rem), 1fr)); gap: 1.25rem; margin-top: 1.25rem; }
.case, .scene { background: var(--paper); border: 1px solid var(--line); border-radius: .6rem; padding: 1.1rem 1.2rem; }
.case.fail, .scene.fail { border: 3px dashed var(--fail); }
.scene { margin-top: 1.25rem; }
.mode { font-size: .8rem; font-weight: 600; text-transform: uppercase; letter-spacing: .06em; color: var(--muted); margin-bottom: .25rem; }
.bars { margin: .75rem 0 1rem; display: grid; grid-template-columns: max-content 1fr 7rem; align-items: center; gap: .45rem .6rem; }
.bar-row { display: contents; }
.bar-name { font-weight: 600; }
.bar { width: 100%; height: 1rem; background: var(--ground); border-radius: .2rem; }
.bar.before rect { fill: var(--before); }
.bar.after rect { fill: var(--after); }
.bar-value { font-variant-numeric: tabular-nums; }
.bar-value .figure { font-weight: 700; font-size: 1.15rem; }
table { border-collapse: collapse; width: 100%; font-size: .92rem; }
caption { text-align: left; font-size: .8rem; color: var(--muted); padding-bottom: .3rem; }
th, td { text-align: left; vertical-align: top; padding: .35rem .5rem; border-bottom: 1px solid var(--line); }
thead th { font-size: .8rem; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); border-bottom: 2px solid var(--line); }
tbody th { font-weight: 600; }
.fields td { font-variant-numeric: tabular-nums; }
.fields tbody th { white-space: nowrap; }
.verdict { margin: .9rem 0 .4rem; padding: .5rem .75rem; border-radius: .4rem; }
.verdict.ok { background: var(--ok-ground); color: var(--ok); font-weight: 600; }
.verdict.fail { background: var(--fail-ground); color: var(--fail); border: 2px solid var(--fail); }
.verdict.fail p { margin: 0 0 .3rem; }
.verdict.fail ul { margin: 0; padding-left: 1.3rem; }
details { margin-top: .6rem; }
summary { cursor: pointer; font-weight: 600; color: var(--accent); }
pre.json { background: var(--ground); border: 1px solid var(--line); border-radius: .4rem; padding: .75rem; overflow-x: auto; font-size: .8rem; line-height: 1.4; margin: .5rem 0 0; }
.chain { list-style: none; padding: 0; margin: 1rem 0 1.25rem; display: flex; flex-wrap: wrap; align-items: center; gap: .5rem; }
.chain li { display: flex; align-items: center; }
.chain li span { background: var(--paper); border: 2px solid var(--ink); border-radius: 999px; padding: .3rem .9rem; font-weight: 600; }
.chain li + li::before { content: "→" / ""; margin-right: .5rem; font-size: 1.2rem; }
.claim-boundary { background: var(--paper); border-left: .35rem solid var(--ink); padding: .75rem 1rem; }
.tag { display: inline-block; padding: .05rem .45rem; border-radius: .25rem; font-weight: 700; }
.tag.sent { border: 2px solid var(--ok); color: var(--ok); }
.tag.deny { border: 2px dashed var(--fail); color: var(--fail); }
.deliveries { font-weight: 600; margin-top: .6rem; }
.ratios td, .ratios th { font-size: .85rem; }
.ratios tr.group th { background: var(--ground); text-transform: uppercase; letter-spacing: .06em; font-size: .78rem; padding-top: .9rem; }
.ratio-cell { white-space: nowrap; }
.ratio-bar, .ratio-axis { display: inline-block; vertical-align: middle; width: 14rem; margin-right: .5rem; }
.ratio-axis { display: block; margin-top: .2rem; }
.ratio-axis text { font-size: 10px; fill: var(--muted); text-transform: none; letter-spacing: 0; }
.ratio-bar line.decade { stroke: var(--line); stroke-width: 1; }
.ratio-bar line.parity { stroke: var(--ink); stroke-width: 2; }
.ratio-bar rect.ahead { fill: var(--after); }
.ratio-bar rect.behind { fill: var(--before); }
.ratio-value { display: inline-block; min-width: 4.5rem; text-align: right; font-variant-numeric: tabular-nums; font-weight: 600; }
.missed { color: var(--fail); }
.run dl { display: grid; grid-template-columns: max-content 1fr; gap: .3rem 1.25rem; margin: 0 0 1rem; }
.run dt { font-weight: 600; }
.run dd { margin: 0; overflow-wrap: anywhere; }
@media (max-width: 40rem) {
  main { padding: 1.25rem .9rem 2rem; }
  .stats { grid-template-columns: 1fr; }
  .case, .scene { padding: .9rem .85rem; }
  .fields { font-size: .85rem; }
  .fields th, .fields td { padding: .3rem .35rem; }
  .fields tbody th { white-space: normal; }
  .stats strong { display: inline; font-size: 2rem; margin-right: .4rem; }
  .bars { grid-template-columns: 1fr auto; grid-auto-flow: row dense; }
  .bar-row .bar { grid-column: 1 / -1; margin-bottom: .3rem; }
  .chain { flex-direction: column; align-items: flex-start; }
  .chain { gap: .15rem; }
  .chain li { flex-direction: column; align-items: flex-start; }
  .chain li + li::before { content: "↓" / ""; margin: 0 0 .15rem 1.1rem; }
  .run dl { grid-template-columns: 1fr; }
  .run dd { margin-bottom: .5rem; }
  table.stack thead { position: absolute; width: 1px; height: 1px; overflow: hidden; clip-path: inset(50%); white-space: nowrap; }
  table.stack, table.stack tbody, table.stack tr { display: block; }
  table.stack tr { padding: .55rem 0; border-bottom: 1px solid var(--line); }
  table.stack td, table.stack th { display: grid; grid-template-columns: 7rem 1fr; gap: .5rem; border: 0; padding: .12rem 0; }
  table.stack td::before { content: attr(data-label); font-size: .74rem; text-transform: uppercase; letter-spacing: .04em; color: var(--muted); padding-top: .12rem; }
  table.stack .lead { display: inline-block; margin: 0 .6rem .2rem 0; }
  table.stack th[scope="row"]:not(.lead), table.stack tr.group th { display: block; }
  table.stack tr.group { border-bottom: 0; padding-bottom: 0; }
  table.stack caption { display: block; }
  .ratio-bar { width: 8rem; }
  .ratio-value { min-width: 0; text-align: left; }
}
@media print {
  body { background: #fff; font-size: 11pt; }
  main { max-width: none; padding: 0; }
  section { margin-top: 1.5rem; }
  .case, .scene, tr, .verdict, pre { break-inside: avoid; }
  h2, h3 { break-after: avoid; }
  details::details-content { content-visibility: visible; display: block; }
  summary { color: var(--ink); }
  .table-wrap { overflow: visible; }
  .stats sup a, a { color: var(--ink); text-decoration: none; }
  * { -webkit-print-color-adjust: exact; print-color-adjust: exact; }
}
`;
