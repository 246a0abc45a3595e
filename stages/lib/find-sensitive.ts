import { isValidCpr } from './cpr.js';
import { passesLuhn } from './luhn.js';

export type FindingKind = 'email' | 'card' | 'national_id';

export interface Finding {
  kind: FindingKind;
  /** As written in the document, except card numbers: see {@link maskCard}. */
  value: string;
}

const EMAIL = /[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}/g;
// 13-19 digits, single spaces or dashes allowed between them. The lookarounds refuse a run
// that continues on either side, so that a longer number is never cut into a card-sized piece.
const CARD = /(?<!\d[ -]?)\d(?:[ -]?\d){12,18}(?![ -]?\d)/g;
// Six date digits, an optional dash, four serial digits, and no digit glued on either side.
const CPR = /(?<!\d)\d{6}-?\d{4}(?!\d)/g;

/**
 * Masks every digit of a card number but the last four, keeping its separators, so that the
 * report still tells which card it was without being a card number itself (PCI DSS allows
 * showing at most the last four): `4111 1111 1111 1111` -> `**** **** **** 1111`.
 */
export function maskCard(value: string): string {
  let keep = 4;
  return [...value]
    .reverse()
    .map((char) => (/\d/.test(char) && keep-- <= 0 ? '*' : char))
    .reverse()
    .join('');
}

/**
 * E-mail addresses, Luhn-valid payment card numbers and CPR numbers with a real date, in the
 * order they appear. Every occurrence counts: a document naming one address twice has two.
 */
export function findSensitive(text: string): Finding[] {
  const found: { index: number; finding: Finding }[] = [];
  for (const match of text.matchAll(EMAIL)) {
    found.push({ index: match.index, finding: { kind: 'email', value: match[0] } });
  }
  for (const match of text.matchAll(CARD)) {
    if (passesLuhn(match[0].replace(/\D/g, ''))) found.push({ index: match.index, finding: { kind: 'card', value: maskCard(match[0]) } });
  }
  for (const match of text.matchAll(CPR)) {
    if (isValidCpr(match[0])) found.push({ index: match.index, finding: { kind: 'national_id', value: match[0] } });
  }
  return found.sort((a, b) => a.index - b.index).map((entry) => entry.finding);
}
