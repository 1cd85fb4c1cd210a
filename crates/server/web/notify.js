// Opt-in desktop notifications, with a short tone, for items that arrive
// while the tab is in the background. Off until the operator turns them on
// (the browser asks for permission then); the choice is kept in this
// browser (localStorage). The tone is made with Web Audio: no sound file.

const KEY = 'actiongate.notify';

/** Whether notifications are on and allowed. */
export function notifyOn() {
  return localStorage.getItem(KEY) === '1' && typeof Notification !== 'undefined' && Notification.permission === 'granted';
}

/** Shows the button's state. */
export function showNotifyState(button) {
  const on = notifyOn();
  button.setAttribute('aria-pressed', String(on));
  button.textContent = on ? 'Notifications on' : 'Notify me';
}

/** Turns notifications on (asking the browser) or off. */
export async function toggleNotify(button) {
  if (notifyOn()) {
    localStorage.removeItem(KEY);
  } else if (typeof Notification === 'undefined') {
    throw new Error('This browser has no desktop notifications.');
  } else {
    const answer = await Notification.requestPermission();
    if (answer !== 'granted') throw new Error('The browser did not allow notifications for this page.');
    localStorage.setItem(KEY, '1');
  }
  showNotifyState(button);
}

/** A notification and a tone, only while the tab is hidden and they are on. */
export function announce(title, body) {
  if (!document.hidden || !notifyOn()) return;
  try {
    // eslint-disable-next-line no-new
    new Notification(title, { body, tag: 'actiongate-queue', renotify: true, icon: '/assets/icon-192.png' });
  } catch { /* the browser refused: nothing else to do */ }
  tone();
}

function tone() {
  try {
    const ctx = new AudioContext();
    const osc = ctx.createOscillator();
    const gain = ctx.createGain();
    osc.frequency.value = 880;
    gain.gain.value = 0.05;
    osc.connect(gain).connect(ctx.destination);
    osc.onended = () => ctx.close();
    osc.start();
    osc.stop(ctx.currentTime + 0.15);
  } catch { /* no audio: the notification is enough */ }
}
