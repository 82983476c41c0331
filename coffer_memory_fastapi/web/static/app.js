// coffer-memory web view: the copy-path buttons. Served as a file so the CSP can forbid inline script.
"use strict";

function copyText(text) {
  if (navigator.clipboard && window.isSecureContext) {
    return navigator.clipboard.writeText(text);
  }
  // Plain http on a LAN name is not a secure context: fall back to a selected, off-screen field.
  const field = document.createElement("textarea");
  field.value = text;
  field.setAttribute("readonly", "");
  field.className = "offscreen";
  document.body.appendChild(field);
  field.select();
  const ok = document.execCommand("copy");
  field.remove();
  return ok ? Promise.resolve() : Promise.reject(new Error("copy refused"));
}

document.addEventListener("click", (event) => {
  const button = event.target.closest("button.copy");
  if (!button) {
    return;
  }
  const label = button.textContent;
  copyText(button.dataset.copy).then(
    () => { button.textContent = "copied"; },
    () => { button.textContent = "select and copy"; },
  );
  setTimeout(() => { button.textContent = label; }, 1500);
});
