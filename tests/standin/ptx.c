// SPDX-License-Identifier: MIT
/*
 * Reads what the stand-in needs from PTX text: the kernel entries with their
 * parameter layout, and the module-scope variables (.global and .const) with
 * their size and alignment. Instruction bodies are skipped by brace depth.
 *
 * Parameters are laid out as the real driver lays them out: each at the next
 * offset aligned to its natural alignment (the element size), or to its
 * .align for arrays such as `.param .align 8 .b8 p[24]` (a struct passed by
 * value); cuFuncGetParamInfo reports exactly these offsets and sizes. An
 * .align after .ptr describes the pointee and does not move the parameter.
 *
 * Text that does not start with a .version directive (after comments) is not
 * PTX (-ENOEXEC, CUDA_ERROR_INVALID_IMAGE); PTX whose declarations we cannot
 * read is -EBADMSG (CUDA_ERROR_INVALID_PTX).
 */
#include <ctype.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "standin.h"

enum tok_type { T_EOF, T_DIRECTIVE, T_IDENT, T_NUMBER, T_STRING, T_PUNCT };

struct token {
	enum tok_type type;
	const char *s;
	size_t len;
};

struct parser {
	const char *p;          /* next character */
	struct token tok;       /* current token */
	struct si_image *img;
	unsigned depth;         /* braces */
};

static bool ident_char(char c)
{
	return isalnum((unsigned char)c) || c == '_' || c == '$';
}

static void advance(struct parser *P)
{
	const char *p = P->p;
	struct token *t = &P->tok;

	for (;;) {
		while (isspace((unsigned char)*p))
			p++;
		if (p[0] == '/' && p[1] == '/') {
			while (*p && *p != '\n')
				p++;
		} else if (p[0] == '/' && p[1] == '*') {
			p += 2;
			while (*p && !(p[0] == '*' && p[1] == '/'))
				p++;
			if (*p)
				p += 2;
		} else {
			break;
		}
	}
	t->s = p;
	if (!*p) {
		t->type = T_EOF;
	} else if (*p == '.' && ident_char(p[1])) {
		t->type = T_DIRECTIVE;
		for (p++; ident_char(*p); p++)
			;
	} else if (isalpha((unsigned char)*p) || *p == '_' || *p == '$' || *p == '%') {
		t->type = T_IDENT;
		for (p++; ident_char(*p); p++)
			;
	} else if (isdigit((unsigned char)*p)) {
		t->type = T_NUMBER;
		while (isalnum((unsigned char)*p) || *p == '.')
			p++;
	} else if (*p == '"') {
		t->type = T_STRING;
		for (p++; *p && *p != '"'; p++)
			;
		if (*p)
			p++;
	} else {
		t->type = T_PUNCT;
		p++;
	}
	t->len = (size_t)(p - t->s);
	P->p = p;
}

static bool is(const struct parser *P, const char *text)
{
	size_t n = strlen(text);

	return P->tok.len == n && !memcmp(P->tok.s, text, n);
}

static bool number(const struct parser *P, unsigned long long *out)
{
	char buf[32];
	char *end;

	if (P->tok.type != T_NUMBER || P->tok.len >= sizeof(buf))
		return false;
	memcpy(buf, P->tok.s, P->tok.len);
	buf[P->tok.len] = '\0';
	*out = strtoull(buf, &end, 0);
	return *end == '\0';
}

/* Size of a scalar type directive, 0 when the token is not one. */
static size_t type_size(const struct parser *P)
{
	static const struct { const char *name; size_t size; } types[] = {
		{ ".b8", 1 },  { ".s8", 1 },   { ".u8", 1 },
		{ ".b16", 2 }, { ".s16", 2 },  { ".u16", 2 }, { ".f16", 2 }, { ".bf16", 2 },
		{ ".b32", 4 }, { ".s32", 4 },  { ".u32", 4 }, { ".f32", 4 },
		{ ".f16x2", 4 }, { ".bf16x2", 4 },
		{ ".b64", 8 }, { ".s64", 8 },  { ".u64", 8 }, { ".f64", 8 },
		{ ".b128", 16 },
	};

	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (is(P, types[i].name))
			return types[i].size;
	return 0;
}

static bool state_space(const struct parser *P)
{
	return is(P, ".global") || is(P, ".const") || is(P, ".local") || is(P, ".shared");
}

static char *dup_token(const struct parser *P)
{
	return strndup(P->tok.s, P->tok.len);
}

/* Parses `[N][M]...` after a name into *count; false on `[]` or garbage. */
static bool dimensions(struct parser *P, unsigned long long *count)
{
	*count = 1;
	while (is(P, "[")) {
		unsigned long long n;

		advance(P);
		if (!number(P, &n) || n == 0 || n > (1ull << 40) / *count)
			return false;
		*count *= n;
		advance(P);
		if (!is(P, "]"))
			return false;
		advance(P);
	}
	return true;
}

static int add_param(struct si_entry *e, size_t size, size_t align)
{
	struct si_param *p = realloc(e->params, (e->nparams + 1) * sizeof(*p));
	size_t offset;

	if (!p)
		return -ENOMEM;
	e->params = p;
	offset = (e->param_bytes + align - 1) & ~(align - 1);
	p[e->nparams].offset = offset;
	p[e->nparams].size = size;
	e->nparams++;
	e->param_bytes = offset + size;
	if (align > e->param_align)
		e->param_align = align;
	return 0;
}

/* One `.param [.align A] .type [.ptr ...] NAME[N]`. */
static int parse_param(struct parser *P, struct si_entry *e)
{
	size_t align = 0, elem = 0;
	bool ptr = false;
	unsigned long long count, a;

	if (!is(P, ".param"))
		return -EBADMSG;
	advance(P);
	for (; P->tok.type == T_DIRECTIVE; advance(P)) {
		if (is(P, ".align")) {
			advance(P);
			if (!number(P, &a) || !a || (a & (a - 1)) || a > 4096)
				return -EBADMSG;
			if (!ptr)
				align = (size_t)a;
		} else if (is(P, ".ptr")) {
			ptr = true;
		} else if (type_size(P)) {
			elem = type_size(P);
		} else if (!state_space(P)) {
			return -EBADMSG;
		}
	}
	if (P->tok.type != T_IDENT || !elem)
		return -EBADMSG;
	advance(P);
	if (!dimensions(P, &count))
		return -EBADMSG;
	return add_param(e, elem * (size_t)count, align ? align : elem);
}

/* `.maxntid x[, y[, z]]` or `.reqntid ...`: the block size limit. */
static void thread_limit(struct parser *P, struct si_entry *e)
{
	unsigned long long product = 1, n;

	advance(P);
	while (number(P, &n)) {
		product *= n ? n : 1;
		advance(P);
		if (!is(P, ","))
			break;
		advance(P);
	}
	if (product < e->max_threads)
		e->max_threads = (unsigned)product;
}

static int parse_entry(struct parser *P)
{
	struct si_entry e = { .max_threads = SI_MAX_THREADS, .param_align = 1 };
	struct si_entry *entries;
	int err = -EBADMSG;

	advance(P);
	if (P->tok.type != T_IDENT)
		return -EBADMSG;
	e.name = dup_token(P);
	if (!e.name)
		return -ENOMEM;
	advance(P);
	if (is(P, "(")) {
		advance(P);
		while (!is(P, ")")) {
			err = parse_param(P, &e);
			if (err)
				goto out_free;
			if (is(P, ","))
				advance(P);
			else if (!is(P, ")"))
				goto out_bad;
		}
		advance(P);
	}
	while (!is(P, "{") && !is(P, ";")) {
		if (P->tok.type == T_EOF)
			goto out_bad;
		if (is(P, ".maxntid") || is(P, ".reqntid"))
			thread_limit(P, &e);
		else
			advance(P);
	}
	if (is(P, ";")) {       /* a declaration; the definition comes elsewhere */
		advance(P);
		err = 0;
		goto out_free;
	}
	P->depth++;
	advance(P);
	if (mps__ptx_entry(P->img, e.name) >= 0) {
		err = 0;
		goto out_free;
	}
	entries = realloc(P->img->entries, (P->img->nentries + 1) * sizeof(*entries));
	if (!entries) {
		err = -ENOMEM;
		goto out_free;
	}
	P->img->entries = entries;
	entries[P->img->nentries++] = e;
	return 0;

out_bad:
	err = -EBADMSG;
out_free:
	free(e.params);
	free(e.name);
	return err;
}

static int add_global(struct si_image *img, char *name, size_t size, size_t align)
{
	struct si_global *g;

	if (mps__ptx_global(img, name) >= 0) {
		free(name);
		return 0;
	}
	g = realloc(img->globals, (img->nglobals + 1) * sizeof(*g));
	if (!g) {
		free(name);
		return -ENOMEM;
	}
	img->globals = g;
	g[img->nglobals].name = name;
	g[img->nglobals].size = size;
	g[img->nglobals].align = align;
	img->nglobals++;
	return 0;
}

/* `.global|.const [.align A] [.vN] .type NAME[N] [= init] [, NAME2 ...];`
 * Declarations we cannot size (texture references, unsized arrays) are
 * skipped, not refused. */
static int parse_variable(struct parser *P, bool external)
{
	size_t align = 0, elem = 0, vec = 1;
	bool skip = external, managed = false;
	unsigned long long a;

	for (advance(P); P->tok.type == T_DIRECTIVE; advance(P)) {
		if (is(P, ".align")) {
			advance(P);
			if (!number(P, &a) || !a || (a & (a - 1)))
				return -EBADMSG;
			align = (size_t)a;
		} else if (is(P, ".v2") || is(P, ".v4") || is(P, ".v8")) {
			vec = (size_t)(P->tok.s[2] - '0');
		} else if (type_size(P)) {
			elem = type_size(P);
		} else if (is(P, ".attribute")) {
			advance(P);
			while (P->tok.type != T_EOF && !is(P, ")")) {
				managed |= is(P, ".managed");
				advance(P);
			}
		} else {
			skip = true;
		}
	}
	for (;;) {
		unsigned long long count;
		unsigned braces = 0;
		char *name;
		int err;

		if (P->tok.type != T_IDENT)
			return -EBADMSG;
		name = dup_token(P);
		if (!name)
			return -ENOMEM;
		advance(P);
		if (!dimensions(P, &count) || skip || !elem) {
			free(name);
			name = NULL;
		}
		/* Initializers are left out: globals start zeroed. */
		while (P->tok.type != T_EOF && (braces || (!is(P, ",") && !is(P, ";")))) {
			if (is(P, "{"))
				braces++;
			else if (is(P, "}") && braces)
				braces--;
			advance(P);
		}
		if (name) {
			err = add_global(P->img, name, elem * vec * (size_t)count,
					 align ? align : elem * vec);
			if (err)
				return err;
			P->img->globals[P->img->nglobals - 1].managed = managed;
		}
		if (P->tok.type == T_EOF)
			return -EBADMSG;
		if (is(P, ";"))
			break;
		advance(P);     /* past ',' */
	}
	advance(P);
	return 0;
}

int mps__ptx_parse(const char *text, struct si_image *img)
{
	struct parser P = { .p = text, .img = img };
	unsigned long long major = 0;
	bool external = false;
	int err = 0;

	memset(img, 0, sizeof(*img));
	advance(&P);
	if (!is(&P, ".version"))
		return -ENOEXEC;
	advance(&P);
	if (P.tok.type != T_NUMBER)
		return -EBADMSG;
	major = strtoull(P.tok.s, NULL, 10);
	img->ptx_version = (unsigned)(major * 10);
	if (P.tok.len > 2 && P.tok.s[P.tok.len - 2] == '.')
		img->ptx_version += (unsigned)(P.tok.s[P.tok.len - 1] - '0');
	advance(&P);
	while (!err && P.tok.type != T_EOF) {
		if (is(&P, "{")) {
			P.depth++;
		} else if (is(&P, "}")) {
			if (!P.depth) {
				err = -EBADMSG;
				break;
			}
			P.depth--;
		} else if (P.depth) {
			/* inside a body */
		} else if (is(&P, ".extern")) {
			external = true;
		} else if (is(&P, ".entry") && !external) {
			err = parse_entry(&P);
			continue;
		} else if (is(&P, ".global") || is(&P, ".const")) {
			err = parse_variable(&P, external);
			external = false;
			continue;
		} else if (is(&P, "(")) {
			/* a .func's parameter list: its .param/.global are not ours */
			unsigned parens = 1;

			while (parens && P.tok.type != T_EOF) {
				advance(&P);
				parens += is(&P, "(");
				parens -= is(&P, ")");
			}
		} else if (is(&P, ";")) {
			external = false;
		}
		advance(&P);
	}
	if (!err && P.depth)
		err = -EBADMSG;
	if (err)
		mps__ptx_release(img);
	return err;
}

void mps__ptx_release(struct si_image *img)
{
	for (unsigned i = 0; i < img->nentries; i++) {
		free(img->entries[i].name);
		free(img->entries[i].params);
	}
	for (unsigned i = 0; i < img->nglobals; i++)
		free(img->globals[i].name);
	free(img->entries);
	free(img->globals);
	memset(img, 0, sizeof(*img));
}

int mps__ptx_entry(const struct si_image *img, const char *name)
{
	for (unsigned i = 0; i < img->nentries; i++)
		if (!strcmp(img->entries[i].name, name))
			return (int)i;
	return -1;
}

int mps__ptx_global(const struct si_image *img, const char *name)
{
	for (unsigned i = 0; i < img->nglobals; i++)
		if (!strcmp(img->globals[i].name, name))
			return (int)i;
	return -1;
}
