/* Text that comes from a target (its names, strings, the agent's messages)
 * or from the command line, made safe for a terminal and for one-line
 * messages. */
#ifndef KPROBE_ESCAPE_H
#define KPROBE_ESCAPE_H

#include <stddef.h>
#include <stdio.h>

/* Whether byte c goes out as it is: printable ASCII.  Everything else
 * (control characters, DEL, and bytes >= 0x80, which a UTF-8 terminal may
 * read as C1 controls such as CSI) is written as \xNN. */
static inline int text_byte_is_plain(unsigned char c)
{
	return c >= 0x20 && c < 0x7f;
}

/* Writes src[0..len) to f, escaped.  Returns the number of characters
 * written. */
size_t text_escape_to(FILE *f, const char *src, size_t len);

/* Copies src into dst[size], escaped, always terminated; an escape is never
 * cut in half.  Returns the length of dst. */
size_t text_escape(char *dst, size_t size, const char *src);

/* The escaped form of the NUL-terminated string in a fixed-size field
 * that the target may have left unterminated, padded with spaces to width
 * (0: no padding). */
void text_field_to(FILE *f, const char *field, size_t field_size, int width);

/* The length text_field_to() gives the field, without padding. */
size_t text_field_width(const char *field, size_t field_size);

#endif
