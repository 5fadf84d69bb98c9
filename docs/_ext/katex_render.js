// Typeset LaTeX with KaTeX, one JSON request per line on stdin, one JSON
// answer per line on stdout, so that a whole build uses a single process.
"use strict";
const katex = require(process.argv[2]);
const readline = require("readline");

const lines = readline.createInterface({ input: process.stdin });
lines.on("line", (line) => {
  const { latex, display } = JSON.parse(line);
  let answer;
  try {
    answer = {
      html: katex.renderToString(latex, {
        displayMode: display,
        throwOnError: true,
        output: "htmlAndMathml", // MathML for screen readers, HTML for the eye
        strict: "error",
      }),
    };
  } catch (err) {
    answer = { error: String(err.message || err) };
  }
  process.stdout.write(JSON.stringify(answer) + "\n");
});
