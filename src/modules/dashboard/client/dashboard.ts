/**
 * The dashboard's little script: copy buttons, a confirmation before destructive actions, and
 * times shown in the reader's own zone as a tooltip. Every page works without it.
 */

for (const button of document.querySelectorAll<HTMLButtonElement>('button[data-copy]')) {
  button.addEventListener('click', async () => {
    const source = document.getElementById(button.dataset.copy!)
    if (!source) return
    const label = button.textContent
    try {
      await navigator.clipboard.writeText(source.textContent ?? '')
      button.textContent = 'Copied'
    } catch {
      // No clipboard (an insecure context or a denied permission): select it for a manual copy.
      const range = document.createRange()
      range.selectNodeContents(source)
      getSelection()?.removeAllRanges()
      getSelection()?.addRange(range)
      button.textContent = 'Press Ctrl+C'
    }
    setTimeout(() => (button.textContent = label), 2000)
  })
}

for (const form of document.querySelectorAll<HTMLFormElement>('form[data-confirm]')) {
  form.addEventListener('submit', (e) => {
    if (!confirm(form.dataset.confirm!)) e.preventDefault()
  })
}

// A form posted twice (a double click) would create two keys or send two test events.
for (const form of document.querySelectorAll<HTMLFormElement>('form[method="post"]')) {
  form.addEventListener('submit', (e) => {
    if (e.defaultPrevented) return
    if (form.dataset.sent) return e.preventDefault()
    form.dataset.sent = '1'
  })
}

for (const time of document.querySelectorAll<HTMLTimeElement>('time[datetime]')) {
  const d = new Date(time.dateTime)
  if (!Number.isNaN(d.getTime())) time.title = d.toLocaleString()
}
