// Sortable tables: a click on a header of a `table.sortable` (th[data-sort="num"|"text"])
// sorts its body by that column, again to reverse. The server renders them sorted already;
// this only re-orders rows it sent.
for (const table of document.querySelectorAll("table.sortable")) {
  const heads = [...table.tHead.rows[0].cells];
  heads.forEach((th, col) => {
    if (!th.dataset.sort) return;
    th.classList.add("sort-head");
    th.tabIndex = 0;
    th.title = "sort by this column";
    const sort = () => {
      const down = th.getAttribute("aria-sort") !== "descending";
      for (const h of heads) h.removeAttribute("aria-sort");
      th.setAttribute("aria-sort", down ? "descending" : "ascending");
      const key = (row) => {
        const text = row.cells[col].textContent.trim();
        return th.dataset.sort === "num" ? Number.parseFloat(text.replace(/[^\d.eE+-]/g, "")) || 0 : text.toLowerCase();
      };
      const rows = [...table.tBodies[0].rows];
      rows.sort((a, b) => {
        const ka = key(a), kb = key(b);
        const c = ka < kb ? -1 : ka > kb ? 1 : 0;
        return down ? -c : c;
      });
      table.tBodies[0].append(...rows);
    };
    th.addEventListener("click", sort);
    th.addEventListener("keydown", (e) => { if (e.key === "Enter") sort(); });
  });
}
