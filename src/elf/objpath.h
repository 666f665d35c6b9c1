/* The file of a loaded object. */
#ifndef KP_ELF_OBJPATH_H
#define KP_ELF_OBJPATH_H

#include <stddef.h>
#include <stdint.h>

/* name as the loader knows the object, when it is absolute (or empty).  A
 * relative name (dlopen("./x.so")) stops naming the file once the process
 * changes directory: then the file /proc/self/maps shows at addr, an
 * address inside the object, copied into buf.  Falls back to name. */
const char *kelf_object_file(const char *name, uintptr_t addr, char *buf, size_t len);

#endif
