/* Escaping untrusted text for terminals (see escape.h). */
#include "escape.h"

#include <string.h>

static const char hex[] = "0123456789abcdef";

size_t text_escape_to(FILE *f, const char *src, size_t len)
{
	size_t out = 0;

	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)src[i];

		if (text_byte_is_plain(c)) {
			fputc(c, f);
			out++;
			continue;
		}
		fputc('\\', f);
		fputc('x', f);
		fputc(hex[c >> 4], f);
		fputc(hex[c & 15], f);
		out += 4;
	}
	return out;
}

size_t text_escape(char *dst, size_t size, const char *src)
{
	size_t n = 0;

	if (!size)
		return 0;
	for (; *src; src++) {
		unsigned char c = (unsigned char)*src;

		if (text_byte_is_plain(c)) {
			if (n + 1 >= size)
				break;
			dst[n++] = (char)c;
			continue;
		}
		if (n + 4 >= size)
			break;
		dst[n++] = '\\';
		dst[n++] = 'x';
		dst[n++] = hex[c >> 4];
		dst[n++] = hex[c & 15];
	}
	dst[n] = '\0';
	return n;
}

size_t text_field_width(const char *field, size_t field_size)
{
	size_t len = strnlen(field, field_size), w = 0;

	for (size_t i = 0; i < len; i++)
		w += text_byte_is_plain((unsigned char)field[i]) ? 1 : 4;
	return w;
}

void text_field_to(FILE *f, const char *field, size_t field_size, int width)
{
	size_t w = text_escape_to(f, field, strnlen(field, field_size));

	for (; width > 0 && w < (size_t)width; w++)
		fputc(' ', f);
}
