/*
 * body.c: a plan's body, the function runN that main calls: one runtime
 * call per IA op in plan order, straight-line SPMD code, each relation
 * freed right after its last reader.
 *
 * First every op's properties are decided, once, into an OpProps (emit.h;
 * op_props below): its inputs and whether each is completed or made dense
 * before it reads them, its sparsity and mask, how its loop is written,
 * the IST body's local mode (no op spans, params given by trt_ist_next,
 * the loop over this rank's share), the relations freed after it.  Then
 * emit_step writes each op: its span for --profile, its inputs made whole,
 * the call its kind's emitter writes, the frees after it, a loop's opening
 * or closing (with a checkpoint at the end of an outermost iteration).
 * The emitters are found in `emitters`, a table with a row per IA op kind
 * (ir/ops.def): a kind without an emitter does not build.
 *
 * An IST body (emit.c's emit_ist_body) is a body too, of the loop's own
 * plan: runN(TrtIstRun *ist), its params from trt_ist_next, returning to
 * trt_ist after the loop rather than finishing the program.
 */
#include "codegen/emit.h"

/* ---- each op's properties ---- */

/* How op reads its input j (in: its inputs): a relation with holes
 * (absent tuples, zero blocks) is completed first when op would not
 * compute the zeros they stand for (optimizer/sparse.c), and a halo's
 * input, or a gather's, lookup's, scatter's or slice's, is made dense. */
static ReadKind read_kind(const IaPlan *p, const IaOp *op, const int *in, int j)
{
	const RelType *t = &p->ops.v[in[j]].type;
	bool whole = false;
	switch (op->kind) {
	case IA_HALO:           /* cut into halos from dense chunks, every one */
		return t->sparse ? READ_DENSE : t->holes ? READ_COMPLETE : READ_AS_IS;
	case IA_JOIN:
	case IA_TWOPHASE:
		whole = j < 2 && !kernel_hole_ok(op->u.join.kernel, j);   /* a mask is read as it is */
		break;
	case IA_CONV:
		whole = true;
		break;
	case IA_MAP:
		whole = op->u.map.kernel && !kernel_hole_ok(op->u.map.kernel, 0);
		break;
	case IA_AGG:
		whole = op->u.agg.agg != AGG_ADD;
		break;
	case IA_STORE:          /* a sparse one is made dense (emit_STORE) */
	case IA_WRITE:          /* a sparse one is written from its elements */
		whole = !t->sparse;
		break;
	case IA_GATHER:
	case IA_LOOKUP:
	case IA_SCATTER:        /* rows and index read whole; a sparse table dense */
		return t->sparse ? READ_DENSE : t->holes ? READ_COMPLETE : READ_AS_IS;
	case IA_SLICE:          /* a window cuts sparse chunks; a scatter reads a sparse input dense */
		return t->sparse && op->u.slice.scatter ? READ_DENSE : READ_AS_IS;
	case IA_READ:
	case IA_BCAST:
	case IA_SHUFFLE:
	case IA_FILTER:
	case IA_INIT:
	case IA_LOAD:
	case IA_RANGE:
	case IA_COUNTER:
	case IA_PRINT:
	case IA_LOOP:
	case IA_ENDLOOP:
		break;
	}
	return whole && t->holes ? READ_COMPLETE : READ_AS_IS;
}

/* The iteration a counter reads: the loop variable of the enclosing
 * repeat block at its depth; in an IST body, the blocks around the IST
 * loop are trt_ist's. */
static void counter_props(Emit *e, const IaLoops *life, OpProps *o)
{
	int want = o->op->u.counter.depth, i = o->i;
	if (e->local && want < e->p->tra->ist.v[e->ist_loop].depth) {
		snprintf(o->iter, sizeof o->iter, "trt_ist_counter(ist, %d)", want);
		return;
	}
	if (e->local) {
		if (life->loopof[i] < 0)
			tr_bug("an IST body's counter outside its loop");
		snprintf(o->iter, sizeof o->iter, "it%d", life->loopof[i]);
		return;
	}
	int l = life->loopof[i], depth = -1;
	for (int k = l; k >= 0; k = life->parent[k])
		depth++;
	for (; l >= 0 && depth > want; depth--)
		l = life->parent[l];
	if (l < 0 || depth != want)
		tr_bug("a counter of loop depth %d outside it", want);
	snprintf(o->iter, sizeof o->iter, "it%d", l);
}

/* How each loop is written, the loop an endloop closes, the outermost
 * loops' numbers (their checkpoints'), and the counters' iterations. */
static void loop_props(Emit *e, const IaLoops *life, OpProps *props)
{
	const IaPlan *p = e->p;
	int nouter = 0;
	for (int i = 0; i < p->ops.n; i++) {
		OpProps *o = &props[i];
		const IaOp *op = o->op;
		o->outer = -1;
		if (op->kind == IA_LOOP) {
			bool outer = life->loopof[i] < 0;
			o->loop = op->u.loop.ist ? (e->local ? LOOP_IST_BODY : LOOP_IST_RUN)
			          : outer ? LOOP_OUTER : LOOP_INNER;
			o->outer = outer ? nouter : -1;
		} else if (op->kind == IA_ENDLOOP) {
			o->loop_op = -1;
			for (int k = 0; k < i; k++)
				if (p->ops.v[k].kind == IA_LOOP && life->endof[k] == i)
					o->loop_op = k;
			if (o->loop_op < 0)
				tr_bug("an endloop closing no loop");
			o->loop = props[o->loop_op].loop;
			o->outer = props[o->loop_op].outer;
			nouter += o->outer >= 0;
		} else if (op->kind == IA_COUNTER)
			counter_props(e, life, o);
	}
}

/* Does load b's value outlive a store of its param: a store after it,
 * up to its last reader (at a loop's end when read inside a loop it is
 * not in: a later iteration reads it after the store)?  The store frees
 * the variable's relation, so such a load holds a reference of its own. */
static bool load_outlives_store(const IaPlan *p, const IaLoops *life, int b)
{
	int t = p->ops.v[b].u.init.tensor;
	for (int s = b + 1; s <= life->dead_after[b]; s++)
		if (p->ops.v[s].kind == IA_STORE && p->ops.v[s].u.store.tensor == t)
			return true;
	return false;
}

/* Where each relation is freed: after its last reader, or, when that
 * reader is inside a loop the relation is not, after that loop ends
 * (frees_after: past the closing brace).  Loads are borrowed from the
 * param's variable and never freed here (but one with a reference of its
 * own, OpProps.own), nor a scatter's result made in place on one
 * (IP_PARAM); a base a scatter updates in place becomes its result, freed
 * as that. */
static void free_props(const IaPlan *p, const IaLoops *life, const InPlace *inplace, OpProps *props)
{
	int n = p->ops.n;
	bool *taken = xcalloc(n + 1, sizeof *taken);
	for (int i = 0; i < n; i++)
		if (inplace[i] == IP_OWNED || inplace[i] == IP_PARAM)
			taken[p->ops.v[i].u.gather.base] = true;
	for (int i = 0; i < n; i++) {
		const IaOp *op = &p->ops.v[i];
		if (!ia_has_result(op->kind) || (op->kind == IA_LOAD && !props[i].own) || inplace[i] == IP_PARAM ||
		    taken[i])
			continue;
		int at = life->dead_after[i];
		if (p->ops.v[at].kind == IA_ENDLOOP)    /* only a loop's end, never a reader, is an ENDLOOP */
			vec_push(&props[at].frees_after, i);
		else
			vec_push(&props[at].frees, i);
	}
	free(taken);
}

/* Every op's properties (OpProps), decided before any is written. */
static OpProps *op_props(Emit *e)
{
	const IaPlan *p = e->p;
	int n = p->ops.n;
	IaLoops life;
	ia_loops(p, &life);
	InPlace *inplace = ia_in_place(p, &life);
	OpProps *props = xcalloc((size_t)n + 1, sizeof *props);
	for (int i = 0; i < n; i++) {
		OpProps *o = &props[i];
		const IaOp *op = &p->ops.v[i];
		o->i = i;
		o->op = op;
		o->nin = ia_inputs(op, o->in);
		for (int j = 0; j < o->nin; j++) {
			o->read[j] = read_kind(p, op, o->in, j);
			o->insparse[j] = p->ops.v[o->in[j]].type.sparse;
			if (o->read[j] == READ_AS_IS)
				snprintf(o->arg[j], sizeof o->arg[j], "r%d", o->in[j]);
			else
				snprintf(o->arg[j], sizeof o->arg[j], "w%d_%d", i, j);
		}
		bool join = ia_op_joins(op->kind);
		o->sparse = op->type.sparse;
		o->masked = join && op->u.join.mask.on;
		o->pattern = -1;
		if (join && o->sparse && !o->masked) {
			const RelType *jin[2] = {&p->ops.v[op->u.join.left].type, &p->ops.v[op->u.join.right].type};
			o->pattern = kernel_sparse_pattern(op->u.join.kernel, jin);
		}
		o->inplace = inplace[i];
		o->own = op->kind == IA_LOAD && load_outlives_store(p, &life, i);
		o->span = !e->local;
		o->ist_given = e->local && (op->kind == IA_INIT ||
		                            (op->kind == IA_STORE && p->ops.v[op->u.store.in].kind == IA_INIT));
	}
	loop_props(e, &life, props);
	free_props(p, &life, inplace, props);
	ia_loops_free(&life);
	free(inplace);
	return props;
}

/* ---- the emitters, one per IA op kind ---- */

static void emit_READ(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\tTrtRel *r%d = trt_read(%d, &type%d, ", o->i, e->tensor_index[o->op->u.read.tensor],
	           e->def[o->i][D_TYPE]);
	end_call_at(e->b, &o->op->place);
}

static void emit_BCAST(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\tTrtRel *r%d = trt_bcast(r%d);\n", o->i, o->in[0]);
}

static void emit_SHUFFLE(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\tTrtRel *r%d = trt_shuffle(r%d, ", o->i, o->in[0]);
	end_call_at(e->b, &o->op->place);
}

/* A join; IA_CONV, a join whose kernel reads windows; IA_TWOPHASE, the
 * same join run by its schedule.  Sampled at a mask, the mask's key dims;
 * with a sparse result, the input whose pattern it keeps. */
static void emit_JOIN(Emit *e, const OpProps *o)
{
	Buf *b = e->b;
	const IaOp *op = o->op;
	int i = o->i;
	buf_printf(b, "\tstatic const TrtJoin join%d = {%d, ", i, op->u.join.on.nmatch);
	int_list(b, op->u.join.on.nmatch, op->u.join.on.lkey);
	buf_puts(b, ", ");
	int_list(b, op->u.join.on.nmatch, op->u.join.on.rkey);
	buf_printf(b, ", %d, ", op->u.join.ngroup);
	int_list(b, op->u.join.ngroup > 0 ? op->u.join.ngroup : 0, op->u.join.group);
	if (o->masked) {
		buf_printf(b, ", 2, %d, ", op->u.join.mask.nkey);
		int_list(b, op->u.join.mask.nkey, op->u.join.mask.key);
	} else if (o->sparse) {
		buf_printf(b, ", %d", o->pattern);
	}
	if (e->in_place[i] >= 0)
		buf_printf(b, ", .inplace = %d", e->in_place[i] + 1);
	buf_puts(b, "};\n");
	buf_printf(b, "\tTrtRel *r%d = %s(%s, %s, ", i,
	           op->kind == IA_TWOPHASE ? "trt_twophase" : o->masked ? "trt_join_sampled" : "trt_join", o->arg[0],
	           o->arg[1]);
	if (o->masked)
		buf_printf(b, "r%d, ", o->in[2]);
	buf_printf(b, "&join%d, kernel%d, &type%d, ", i, e->def[i][D_KERNEL], e->def[i][D_TYPE]);
	place_literal(b, &op->place);
	if (op->kind == IA_TWOPHASE)
		buf_printf(b, ", &twophase%d", e->def[i][D_SCHED]);
	buf_puts(b, ");\n");
}

#define emit_CONV emit_JOIN
#define emit_TWOPHASE emit_JOIN

static void emit_AGG(Emit *e, const OpProps *o)
{
	static const char *aggs[] = {"TRT_AGG_ADD", "TRT_AGG_MAX", "TRT_AGG_MIN"};
	const IaOp *op = o->op;
	int g0 = 0;
	buf_printf(e->b, "\tstatic const int group%d[] = ", o->i);
	int_list(e->b, op->u.agg.ngroup ? op->u.agg.ngroup : 1, op->u.agg.ngroup ? op->u.agg.group : &g0);
	buf_printf(e->b, ";\n\tTrtRel *r%d = trt_agg(%s, %d, group%d, %s, &type%d, ", o->i, o->arg[0], op->u.agg.ngroup,
	           o->i, aggs[op->u.agg.agg], e->def[o->i][D_TYPE]);
	end_call_at(e->b, &op->place);
}

/* A map: its key map, and its kernel (none for a rekey). */
static void emit_MAP(Emit *e, const OpProps *o)
{
	const IaOp *op = o->op;
	int k0 = 0;
	buf_printf(e->b, "\tstatic const int keymap%d[] = ", o->i);
	int_list(e->b, op->u.map.nkey ? op->u.map.nkey : 1, op->u.map.nkey ? op->u.map.keymap : &k0);
	buf_printf(e->b, ";\n\tTrtRel *r%d = trt_map%s(%s, %d, keymap%d, ", o->i, e->in_place[o->i] >= 0 ? "_in_place" : "",
	           o->arg[0], op->u.map.nkey, o->i);
	if (op->u.map.kernel)
		buf_printf(e->b, "kernel%d", e->def[o->i][D_KERNEL]);
	else
		buf_puts(e->b, "NULL");
	buf_printf(e->b, ", &type%d, ", e->def[o->i][D_TYPE]);
	end_call_at(e->b, &op->place);
}

static void emit_FILTER(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\tTrtRel *r%d = trt_filter(r%d, pred%d, ", o->i, o->in[0], e->def[o->i][D_PRED]);
	end_call_at(e->b, &o->op->place);
}

static void emit_WRITE(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\ttrt_write(%d, %s);\n", e->output_index[o->op->u.write.tensor], o->arg[0]);
}

/* A param's initial value: read from its file or made by rank; in an IST
 * body, given by trt_ist_next. */
static void emit_INIT(Emit *e, const OpProps *o)
{
	static const char *kinds[] = {"?", "TRT_INIT_ZEROS", "TRT_INIT_ONES", "TRT_INIT_UNIFORM", "TRT_INIT_NORMAL", "?"};
	Buf *b = e->b;
	int t = o->op->u.init.tensor;
	const Tensor *ten = &e->p->tra->tensors.v[t];
	if (o->ist_given) {
		buf_printf(b, "\tTrtRel *r%d = NULL;\n", o->i);
		return;
	}
	if (ten->init == INIT_FILE)
		buf_printf(b, "\tTrtRel *r%d = trt_read(%d, &type%d, ", o->i, e->tensor_index[t], e->def[o->i][D_TYPE]);
	else
		buf_printf(b, "\tTrtRel *r%d = trt_init_param(%d, &type%d, ", o->i, e->tensor_index[t], e->def[o->i][D_TYPE]);
	place_literal(b, &o->op->place);
	if (ten->init != INIT_FILE)
		buf_printf(b, ", %s, %.17g, %.17g", kinds[ten->init], ten->init_a, ten->init_b);
	buf_puts(b, ");\n");
}

/* A param's value: borrowed from its variable, or a reference of its own
 * (the chunks shared) when it outlives a store of the param. */
static void emit_LOAD(Emit *e, const OpProps *o)
{
	int t = o->op->u.init.tensor;
	if (o->own)
		buf_printf(e->b, "\tTrtRel *r%d = trt_rel_clone(var%d);\n", o->i, t);
	else
		buf_printf(e->b, "\tTrtRel *r%d = var%d;\n", o->i, t);
}

static void emit_RANGE(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\tTrtRel *r%d = trt_range(&type%d, ", o->i, e->def[o->i][D_TYPE]);
	end_call_at(e->b, &o->op->place);
}

static void emit_COUNTER(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\tTrtRel *r%d = trt_counter(&type%d, %s);\n", o->i, e->def[o->i][D_TYPE], o->iter);
}

static void emit_SLICE(Emit *e, const OpProps *o)
{
	const IaOp *op = o->op;
	buf_printf(e->b, "\tstatic const TrtWindow window%d = {%d, %" PRId64 ", %" PRId64 ", %d};\n", o->i,
	           op->u.slice.dim, op->u.slice.shift, op->u.slice.stride, op->u.slice.scatter);
	buf_printf(e->b, "\tTrtRel *r%d = trt_slice(%s, %s, &window%d, &type%d, ", o->i, o->arg[0],
	           op->u.slice.off >= 0 ? o->arg[1] : "NULL", o->i, e->def[o->i][D_TYPE]);
	end_call_at(e->b, &op->place);
}

/* A param's new value, dense and whole: nothing to do when a scatter
 * updated it in place, or in an IST body for the value trt_ist_next gave. */
static void emit_STORE(Emit *e, const OpProps *o)
{
	int t = o->op->u.store.tensor, in = o->in[0];
	if (o->ist_given)
		;
	else if (o->inplace == IP_KEPT)
		buf_printf(e->b, "\t/* var%d holds r%d: updated in place */\n", t, in);
	else if (o->insparse[0])
		buf_printf(e->b, "\ttrt_free(var%d);\n\tvar%d = trt_densify(r%d);\n", t, t, in);
	else
		buf_printf(e->b, "\ttrt_free(var%d);\n\tvar%d = trt_rel_clone(%s);\n", t, t, o->arg[0]);
}

static void emit_PRINT(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\ttrt_print(r%d, ", o->in[0]);
	c_string(e->b, e->p->tra->tensors.v[o->op->u.store.tensor].name);
	buf_puts(e->b, ");\n");
}

/* A gather, a look-up (IA_LOOKUP), or a scatter (IA_SCATTER): its base,
 * whether it is updated in place, the rows' scale. */
static void emit_GATHER(Emit *e, const OpProps *o)
{
	Buf *b = e->b;
	const IaOp *op = o->op;
	bool scatter = op->kind == IA_SCATTER;
	const TraProg *t = e->p->tra;
	buf_printf(b, "\tTrtRel *r%d = %s(%s, %s, ", o->i, scatter ? "trt_scatter" : "trt_gather", o->arg[0], o->arg[1]);
	if (scatter)
		buf_printf(b, "%s, %d, %.17g, ", op->u.gather.base >= 0 ? o->arg[2] : "NULL",
		           o->inplace == IP_OWNED || o->inplace == IP_PARAM, op->u.gather.scale);
	buf_printf(b, "%d, &type%d, ", op->u.gather.dim, e->def[o->i][D_TYPE]);
	place_literal(b, &op->place);
	buf_puts(b, ", ");
	c_string(b, op->u.gather.itensor >= 0 ? t->tensors.v[op->u.gather.itensor].name : "the index");
	buf_puts(b, ", ");
	c_string(b, op->u.gather.tensor >= 0 ? t->tensors.v[op->u.gather.tensor].name : "the table");
	buf_puts(b, ");\n");
}

#define emit_LOOKUP emit_GATHER
#define emit_SCATTER emit_GATHER

static void emit_HALO(Emit *e, const OpProps *o)
{
	buf_printf(e->b, "\tTrtRel *r%d = trt_halo(%s, &type%d);\n", o->i, o->arg[0], e->def[o->i][D_TYPE]);
}

/* An IST loop in the program: the IST run standing for the whole loop,
 * given the iterations of the blocks around it, outermost first, for the
 * body's counters of them.  Every other loop opens after the op's span
 * (loop_open). */
static void emit_LOOP(Emit *e, const OpProps *o)
{
	if (o->loop != LOOP_IST_RUN)
		return;
	int l = o->op->u.loop.ist - 1;
	Vec(int) open = {0};
	for (int j = 0; j < o->i; j++)
		if (e->p->ops.v[j].kind == IA_LOOP)
			vec_push(&open, j);
		else if (e->p->ops.v[j].kind == IA_ENDLOOP)
			open.n--;
	buf_printf(e->b, "\ttrt_ist(&ist%d, &params, run%d, ", e->ist_desc[l], e->ist_run[l]);
	for (int k = 0; k < open.n; k++)
		buf_printf(e->b, "%sit%d", k ? ", " : "(const int64_t[]){", open.v[k]);
	buf_puts(e->b, open.n ? "});\n" : "NULL);\n");
	vec_free(&open);
}

/* A loop closes after the frees at its end (loop_close). */
static void emit_ENDLOOP(Emit *e, const OpProps *o)
{
}

/* The emitter of each IA op kind, a row per row of ir/ops.def: a kind
 * without an emit_NAME above does not build. */
static void (*const emitters[])(Emit *e, const OpProps *o) = {
#define IA_OP(n, s, mv, in, k, m) [IA_##n] = emit_##n,
#include "ir/ops.def"
};

/* ---- around each op: spans, whole inputs, frees, loops ---- */

/* A loop op's loop, opened after its span. */
static void loop_open(Emit *e, const OpProps *o)
{
	int i = o->i;
	int64_t count = o->op->u.loop.count;
	switch (o->loop) {
	case LOOP_INNER:
		buf_printf(e->b, "\ttrt_loop_begin(%" PRId64 ");\n", count);
		buf_printf(e->b, "\tfor (int64_t it%d = 0; it%d < %" PRId64 "; it%d++) {\n\ttrt_loop_iter(it%d);\n", i, i,
		           count, i, i);
		return;
	case LOOP_OUTER:        /* where --resume may start */
		buf_printf(e->b, "\ttrt_loop_begin(%" PRId64 ");\n", count);
		buf_printf(e->b, "\tfor (int64_t it%d = trt_resume(%d, %" PRId64 ", &params); it%d < %" PRId64
		           "; it%d++) {\n\ttrt_loop_iter(it%d);\n", i, o->outer, count, i, count, i, i);
		return;
	case LOOP_IST_RUN:      /* emit_LOOP's trt_ist */
		return;
	case LOOP_IST_BODY:
		buf_printf(e->b, "\tfor (int64_t it%d; trt_ist_next(ist, &istp, &it%d); ) {\n", i, i);
		return;
	}
}

/* The end of an endloop's loop, after the frees at its end: a checkpoint
 * at the end of an outermost iteration (none inside an IST run). */
static void loop_close(Emit *e, const OpProps *o)
{
	switch (o->loop) {
	case LOOP_OUTER:
		buf_printf(e->b, "\ttrt_checkpoint(%d, it%d, %" PRId64 ", &params);\n", o->outer, o->loop_op,
		           e->p->ops.v[o->loop_op].u.loop.count);
		buf_puts(e->b, "\t}\n\ttrt_loop_end();\n");
		return;
	case LOOP_INNER:
		buf_puts(e->b, "\t}\n\ttrt_loop_end();\n");
		return;
	case LOOP_IST_RUN:
		return;
	case LOOP_IST_BODY:
		buf_puts(e->b, "\t}\n");
		return;
	}
}

/* Whether op o reads relation rel only through copies made whole
 * (trt_complete, trt_densify) before it runs. */
static bool read_whole_only(const OpProps *o, int rel)
{
	bool any = false;
	for (int j = 0; j < o->nin; j++)
		if (o->in[j] == rel) {
			if (o->read[j] == READ_AS_IS)
				return false;
			any = true;
		}
	return any;
}

/* The frees of relations rel[0 .. n): with o, only those o reads only
 * made whole (whole) or the others (!whole). */
static void emit_frees(Buf *b, const int *rel, int n, const OpProps *o, bool whole)
{
	for (int j = 0; j < n; j++)
		if (!o || read_whole_only(o, rel[j]) == whole)
			buf_printf(b, "\ttrt_free(r%d);\n", rel[j]);
}

/* One op: its span, its inputs made whole first and freed after, its
 * call, the relations it read last, and a loop's bookkeeping. */
static void emit_step(Emit *e, const OpProps *o)
{
	Buf *b = e->b;
	int i = o->i;
	buf_printf(b, "\n\t/* #%d %s */\n", i, ia_op_name(o->op->kind));
	if (o->span)
		buf_printf(b, "\ttrt_op_begin(%d);\n", i);
	for (int j = 0; j < o->nin; j++)
		if (o->read[j] != READ_AS_IS)
			buf_printf(b, "\tTrtRel *%s = %s(r%d);\n", o->arg[j],
			           o->read[j] == READ_DENSE ? "trt_densify" : "trt_complete", o->in[j]);
	/* a relation this op reads last, and only made whole: freed before
	 * the op, so that the copy's chunks it shares are the copy's alone,
	 * which an op in place may then write (a sparse result in its
	 * input's chunks: ia_elementwise_in_place) */
	emit_frees(b, o->frees.v, o->frees.n, o, true);
	emitters[o->op->kind](e, o);
	for (int j = 0; j < o->nin; j++)
		if (o->read[j] != READ_AS_IS)
			buf_printf(b, "\ttrt_free(%s);\n", o->arg[j]);
	if (o->span)
		buf_printf(b, "\ttrt_op_end(%d);\n", i);
	emit_frees(b, o->frees.v, o->frees.n, o, false);
	if (o->op->kind == IA_LOOP)
		loop_open(e, o);
	else if (o->op->kind == IA_ENDLOOP)
		loop_close(e, o);
	emit_frees(b, o->frees_after.v, o->frees_after.n, NULL, false);
}

/* ---- the body ---- */

/* An IST body's params as trt_ist_next takes them. */
static void emit_ist_vars(Emit *e)
{
	Buf *b = e->b;
	const IaPlan *p = e->p;
	int n = 0;
	buf_puts(b, "\tstatic const int ist_tensors[] = {");
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM && ist_param(p, t))
			buf_printf(b, "%s%d", n++ ? ", " : "", e->tensor_index[t]);
	buf_printf(b, "%s};\n\tTrtRel **const ist_vars[] = {", n ? "" : "-1");
	n = 0;
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM && ist_param(p, t))
			buf_printf(b, "%s&var%d", n++ ? ", " : "", t);
	buf_printf(b, "%s};\n\tconst TrtParams istp = {%d, ist_tensors, ist_vars};\n", n ? "" : "NULL", n);
}

/* The function's head: sparse inputs placed first (the memory check adds
 * what their files hold beyond the plan's estimate), a variable per param
 * and the params' table for checkpoints (and an IST body's for
 * trt_ist_next). */
static void body_begin(Emit *e, const OpProps *props)
{
	Buf *b = e->b;
	const IaPlan *p = e->p;
	if (e->local)
		buf_puts(b, "static BODY int run" HOLE "(TrtIstRun *ist)\n{\n");
	else
		buf_puts(b, "static BODY int run" HOLE "(void)\n{\n");
	bool sparse_in = false;
	for (int i = 0; i < p->ops.n && !e->local; i++)
		if (props[i].op->kind == IA_READ && props[i].sparse) {
			int k = e->map[e->mapbase[i]];         /* the rows' map; a csc file's columns' */
			int kc = p->ops.v[i].type.nkey > 1 ? e->map[e->mapbase[i] + 1] : k;
			buf_printf(b, "\ttrt_balance(%d, &type%d, %.17g, (const double[][2]){{%.6g, %.6g}, {%.6g, %.6g}}, ",
			           e->tensor_index[p->ops.v[i].u.read.tensor], e->def[i][D_TYPE],
			           rel_density(&p->ops.v[i].type), e->map_elem[k], e->map_line[k],
			           e->map_elem[kc], e->map_line[kc]);
			end_call_at(b, &p->ops.v[i].place);
			sparse_in = true;
		}
	if (sparse_in)
		buf_puts(b, "\ttrt_mem_recheck();\n");
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM)
			buf_printf(b, "\tTrtRel *var%d = NULL;\t/* param %s */\n", t, p->tra->tensors.v[t].name);
	int nparams = 0;
	buf_puts(b, "\tstatic const int param_tensors[] = {");
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM)
			buf_printf(b, "%s%d", nparams++ ? ", " : "", e->tensor_index[t]);
	buf_printf(b, "%s};\n\tTrtRel **const param_vars[] = {", nparams ? "" : "-1");
	nparams = 0;
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM)
			buf_printf(b, "%s&var%d", nparams++ ? ", " : "", t);
	buf_printf(b, "%s};\n\tconst TrtParams params = {%d, param_tensors, param_vars};\n\t(void)params;\n",
	           nparams ? "" : "NULL", nparams);
	if (e->local)
		emit_ist_vars(e);
}

/* The function's end: the params freed; a program finishes, an IST body
 * returns to trt_ist. */
static void body_end(Emit *e)
{
	Buf *b = e->b;
	const IaPlan *p = e->p;
	if (e->local)
		buf_puts(b, "\ttrt_ist_end(ist, &istp);\n");
	for (int t = 0; t < p->tra->tensors.n; t++)
		if (p->tra->tensors.v[t].role == TENSOR_PARAM)
			buf_printf(b, "\ttrt_free(var%d);\n", t);
	buf_puts(b, e->local ? "\treturn 0;\n}\n" : "\treturn trt_finish();\n}\n");
}

void emit_body(Emit *e)
{
	int n = e->p->ops.n;
	OpProps *props = op_props(e);
	body_begin(e, props);
	for (int i = 0; i < n; i++)
		emit_step(e, &props[i]);
	body_end(e);
	for (int i = 0; i < n; i++) {
		vec_free(&props[i].frees);
		vec_free(&props[i].frees_after);
	}
	free(props);
}
