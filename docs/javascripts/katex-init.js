// Typeset the math of every page with the KaTeX shipped in docs/assets/katex (no CDN: the site builds and
// reads offline). pymdownx.arithmatex (generic mode) wraps \( … \) and \[ … \] in span/div.arithmatex.
document$.subscribe(({ body }) => {
  renderMathInElement(body, {
    delimiters: [
      { left: "$$", right: "$$", display: true },
      { left: "$", right: "$", display: false },
      { left: "\\(", right: "\\)", display: false },
      { left: "\\[", right: "\\]", display: true },
    ],
    throwOnError: false,
  });
});
