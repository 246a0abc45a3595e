/**
 * The Luhn (mod 10) checksum every payment card number carries. Most random digit runs of card
 * length fail it, so it is what separates a card number from an order reference.
 * @param digits the number's digits only (separators removed).
 */
export function passesLuhn(digits: string): boolean {
  if (!/^\d+$/.test(digits)) return false;
  let sum = 0;
  for (let i = 0; i < digits.length; i++) {
    // Double every second digit counting from the right (the check digit is not doubled).
    let digit = Number(digits[digits.length - 1 - i]);
    if (i % 2 === 1) digit = digit * 2 > 9 ? digit * 2 - 9 : digit * 2;
    sum += digit;
  }
  return sum % 10 === 0;
}
