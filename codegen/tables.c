/*
 * tables.c: the emitted file's const tables, which the runtime reads:
 * the program's tensors (TrtTensor), each plan's ops for --profile and
 * the chunk store's schedule (TrtOpInfo) and its TrtProgram, a relation type per op (TrtType), a
 * filter's key predicate, a two-phase schedule's per-rank join groups
 * (TrtTwoPhase), and an IST loop's descriptor (TrtIst).  Each writes one
 * definition into e->b; emit.c shares equal ones.
 */
#include "codegen/emit.h"

void emit_tensors(Emit *e)
{
	Buf *b = e->b;
	const TraProg *t = e->p->tra;
	int n = 0;

	/* outputs first: NAME= names a param's output rather than the param */
	buf_puts(b, "static const TrtTensor tensors[] = {\n");
	for (int pass = 0; pass < 2; pass++)
		for (int i = 0; i < t->tensors.n; i++) {
			const Tensor *ten = &t->tensors.v[i];
			bool out = pass == 0;
			if (out ? !ten->output : ten->role == TENSOR_TEMP)
				continue;
			(out ? e->output_index : e->tensor_index)[i] = n++;
			const char *role = out ? "TRT_OUTPUT" : ten->role == TENSOR_INPUT ? "TRT_INPUT" : "TRT_PARAM";
			buf_puts(b, "\t{");
			c_string(b, ten->name);
			buf_printf(b, ", %s, %s, %d, {", role, cdtype(ten->dtype), ten->rank);
			for (int d = 0; d < ten->rank; d++)
				buf_printf(b, "%s%" PRId64, d ? ", " : "", ten->shape[d]);
			buf_puts(b, "}, ");
			const char *path = out ? ten->outpath : ten->path;
			if (path)
				c_string(b, path);
			else
				buf_puts(b, "NULL");
			buf_puts(b, !out && ten->sparse ? ", 1},\n" : "},\n");
		}
	if (n == 0)
		buf_puts(b, "\t{NULL, TRT_INPUT, TRT_F32, 0, {0}, NULL},\n");
	buf_puts(b, "};\n\n");
}

/* Plan k's ops, for --profile and the runtime's chunk store (each op's
 * inputs, a load's or store's param): opsK. */
void emit_ops(Emit *e, int k)
{
	Buf *b = e->b;
	const TraProg *t = e->p->tra;
	buf_printf(b, "static const TrtOpInfo ops%d[] = {\n", k);
	for (int i = 0; i < e->p->ops.n; i++) {
		const IaOp *op = &e->p->ops.v[i];
		Buf label = {0};
		int of = op->tra >= 0 && op->tra < t->ops.n ? t->ops.v[op->tra].grad_of : 0;
		if (of > 0)             /* a backward op: the statement it differentiates */
			buf_printf(&label, "grad: %s", t->stmts.v[of - 1].text);
		else if (op->stmt >= 0)
			buf_printf(&label, "%s", t->stmts.v[op->stmt].text);
		else if (op->kind == IA_READ)
			buf_printf(&label, "read %s", t->tensors.v[op->u.read.tensor].name);
		else if (op->kind == IA_WRITE)
			buf_printf(&label, "write %s", t->tensors.v[op->u.write.tensor].name);
		buf_printf(b, "\t{\"%s\", ", ia_op_name(op->kind));
		c_string(b, label.s ? label.s : "");
		double bytes = op->bytes_sent;
		if (op->kind == IA_LOOP && op->u.loop.ist) {   /* an IST run: its exchanges and gather, f32 */
			int l = op->u.loop.ist - 1;
			const IaPlan *body = e->o->ist[e->plan * e->o->nist + l];
			IstTraffic tr = ist_traffic(body->tra, &e->p->tra->ist.v[l], e->p->nranks);
			bytes = 4 * ((double)(tr.rounds - 1) * (tr.exchange + tr.average) + tr.gather);
		}
		int in[MAXIN], nin = ia_inputs(op, in);
		int var = op->kind == IA_LOAD ? op->u.init.tensor + 1 : op->kind == IA_STORE ? op->u.store.tensor + 1 : 0;
		buf_printf(b, ", %.17g, %.17g, %.17g, %.17g, %d, {", bytes, op->seconds, op->flops, op->floor_seconds, nin);
		for (int j = 0; j < nin; j++)
			buf_printf(b, "%s%d", j ? ", " : "", in[j]);
		buf_printf(b, "}, %d},\n", var);
		buf_free(&label);
	}
	buf_puts(b, "};\n\n");
}

/* The program under each plan, increasing rank counts, and main: the
 * runtime picks the plan, main runs its body. */
void emit_programs(Emit *e, const IaPlan *const *plans, int nplans, const int *run, const CgOptions *o)
{
	Buf *b = e->b;
	const IaPlan *p0 = plans[0];
	int ntensors = 0;
	for (int i = 0; i < p0->tra->tensors.n; i++)
		ntensors += (e->tensor_index[i] >= 0) + (e->output_index[i] >= 0);
	int nloops = 0, depth = 0;      /* outermost repeat blocks, for checkpoints */
	int deepest = 0;                /* repeat blocks nested, for --log's columns */
	for (int i = 0; i < p0->ops.n; i++) {
		nloops += p0->ops.v[i].kind == IA_LOOP && depth == 0;
		depth += p0->ops.v[i].kind == IA_LOOP ? 1 : p0->ops.v[i].kind == IA_ENDLOOP ? -1 : 0;
		deepest = depth > deepest ? depth : deepest;
	}
	buf_puts(b, "static const TrtProgram programs[] = {\n");
	for (int k = 0; k < nplans; k++) {
		buf_puts(b, "\t{TRT_ABI, ");
		c_string(b, o->program);
		/* out of core: the plan's budget is the run's default (--mem-budget
		 * overrides it), and its peak the resident one */
		const IaPlan *p = plans[k];
		buf_printf(b, ", tensors, %d, ops%d, %d, %" PRIu64 "u, %d, %.17g, %d, %d, %d, %.17g},\n", ntensors, k,
		           p->ops.n, o->seed, p->nranks, p->mem_budget > 0 ? p->resident_peak : p->peak_bytes, p->peak_op,
		           nloops, deepest, p->mem_budget);
	}
	buf_puts(b, "};\n\nstatic int (*const run[])(void) = {");
	for (int k = 0; k < nplans; k++)
		buf_printf(b, "%srun%d", k ? ", " : "", run[k]);
	buf_printf(b, "};\n\nint main(int argc, char **argv)\n{\n\treturn run[trt_init(&argc, &argv, programs, %d)]();\n}\n",
	           nplans);
}

/* The map placing op i's result, or 0: its placement partitions on one dim
 * of more than one block (others of one block change no site), and that
 * dim's class has a map. */
static int placed_by_map(const Emit *e, int i)
{
	const IaOp *op = &e->p->ops.v[i];
	int d = -1, n = 0;
	if (op->place.kind != PL_PART)
		return 0;
	for (int k = 0; k < op->place.ndims; k++)
		if (rel_frontier(&op->type, op->place.dims[k]) > 1) {
			d = op->place.dims[k];
			n++;
		}
	return n == 1 ? e->map[e->mapbase[i] + d] : 0;
}

/* Does op compute on its rank's own tuples (the work a placement spreads)? */
static bool local_work(const IaOp *op)
{
	switch (op->kind) {
	case IA_JOIN: case IA_AGG: case IA_MAP: case IA_FILTER: case IA_CONV:
		return true;
	case IA_READ: case IA_BCAST: case IA_SHUFFLE: case IA_WRITE: case IA_INIT: case IA_LOAD:
	case IA_RANGE: case IA_COUNTER: case IA_SLICE: case IA_STORE: case IA_PRINT: case IA_LOOP:
	case IA_ENDLOOP: case IA_GATHER: case IA_LOOKUP: case IA_SCATTER: case IA_HALO: case IA_TWOPHASE:
		return false;
	}
	return false;
}

/* Is op's work driven by stored elements: a sparse input or result? */
static bool sparse_driven(const IaPlan *p, const IaOp *op)
{
	int in[MAXIN], n = ia_inputs(op, in);
	bool sparse = op->type.sparse;
	for (int j = 0; j < n; j++)
		sparse |= p->ops.v[in[j]].type.sparse;
	return sparse;
}

/* What the plan says a block of each map costs (the weights trt_balance
 * places blocks by): the flops of the local ops whose results the map
 * places, times their calls (IaLoops.times), per stored element of the
 * class's sparse inputs for the ops a sparse relation drives, per line of
 * the class's dims for the dense ones.  The
 * dense work after a sparse product follows the rows, not the stored
 * elements: on a graph whose heavy rows sit together, counting a line as
 * one element put 11 of 16 blocks on one rank (bench/README.md, issue 33).
 * Flops, not the model's seconds: the built-in model prices the sparse
 * loops at its one loop rate, 5-10x below what they run at, which made a
 * line weigh 8 elements where it measured about 200 (the GCN's flops:
 * 108). */
static void site_map_costs(Emit *e)
{
	const IaPlan *p = e->p;
	int n = p->ops.n;
	e->map_elem = xcalloc((size_t)e->nmap + 1, sizeof *e->map_elem);
	e->map_line = xcalloc((size_t)e->nmap + 1, sizeof *e->map_line);
	if (!e->nmap)
		return;
	double *stored = xcalloc((size_t)e->nmap + 1, sizeof *stored);
	double *lines = xcalloc((size_t)e->nmap + 1, sizeof *lines);
	IaLoops l;
	ia_loops(p, &l);
	for (int i = 0; i < n; i++) {
		const IaOp *op = &p->ops.v[i];
		for (int d = 0; d < op->type.nkey; d++) {
			int k = e->map[e->mapbase[i] + d];
			bool again = false;     /* another dim of the class before */
			for (int c = 0; c < d; c++)
				again |= e->map[e->mapbase[i] + c] == k;
			if (k && op->kind == IA_READ && op->type.sparse && !again)
				stored[k] += rel_stored(&op->type);
			if (k)
				lines[k] = (double)op->type.extent[d];
		}
		int k = placed_by_map(e, i);
		if (!k || !local_work(op))
			continue;
		(sparse_driven(p, op) ? e->map_elem : e->map_line)[k] += op->flops * l.times[i];
	}
	for (int k = 1; k <= e->nmap; k++) {
		e->map_elem[k] = stored[k] > 0 ? e->map_elem[k] / stored[k] : 0;
		e->map_line[k] = lines[k] > 0 ? e->map_line[k] / lines[k] : 0;
	}
	ia_loops_free(&l);
	free(stored);
	free(lines);
}

/* The site maps of plan e->p: each class of dims (ia_dim_classes) that
 * holds a dim of a sparse input gets a map id, 1, 2, ..., in order of
 * first appearance; e->map[e->mapbase[i] + d] is op i's dim d's, 0 for
 * none.  An IST body places nothing by a map (its ranks are a subnet's). */
void emit_site_maps(Emit *e)
{
	emit_site_maps_free(e);
	const IaPlan *p = e->p;
	int n = p->ops.n;
	e->mapbase = xcalloc((size_t)n + 1, sizeof *e->mapbase);
	int *of = xcalloc((size_t)(n + 1) * MAXDIM, sizeof *of);
	int nclass = ia_dim_classes(p, e->mapbase, of), nmap = 0;
	int *id = xcalloc((size_t)nclass + 1, sizeof *id);
	for (int i = 0; i < n && !e->local; i++)
		if (p->ops.v[i].kind == IA_READ && p->ops.v[i].type.sparse)
			for (int d = 0; d < p->ops.v[i].type.nkey; d++) {
				int k = of[e->mapbase[i] + d];
				id[k] = id[k] ? id[k] : ++nmap;
			}
	e->map = xcalloc((size_t)e->mapbase[n] + 1, sizeof *e->map);
	for (int s = 0; s < e->mapbase[n]; s++)
		e->map[s] = id[of[s]];
	e->nmap = nmap;
	site_map_costs(e);
	free(id);
	free(of);
}

void emit_site_maps_free(Emit *e)
{
	free(e->mapbase);
	free(e->map);
	free(e->map_elem);
	free(e->map_line);
	e->mapbase = e->map = NULL;
	e->map_elem = e->map_line = NULL;
	e->nmap = 0;
}

void emit_type(Emit *e, int i)
{
	const RelType *t = &e->p->ops.v[i].type;
	const int *map = e->map + e->mapbase[i];
	Buf *b = e->b;
	buf_printf(b, "static const TrtType type" HOLE " = {%s, %d, {", cdtype(t->dtype), t->nkey);
	for (int d = 0; d < t->nkey; d++)
		buf_printf(b, "%s%" PRId64, d ? ", " : "", t->extent[d]);
	buf_puts(b, "}, {");
	for (int d = 0; d < t->nkey; d++)
		buf_printf(b, "%s%" PRId64, d ? ", " : "", t->block[d]);
	buf_printf(b, "}, %d, ", t->nchunk);
	int_list(b, t->nchunk, t->chunkdim);
	bool halo = false;
	for (int d = 0; d < t->nkey; d++)
		halo |= t->hext[d] > 0;
	if (halo) {                     /* a halo's rows and its data's extent */
		const int64_t *h[3] = {t->hlo, t->hhi, t->hext};
		buf_printf(b, ", %d", t->sparse);
		for (int j = 0; j < 3; j++) {
			buf_puts(b, ", {");
			for (int d = 0; d < t->nkey; d++)
				buf_printf(b, "%s%" PRId64, d ? ", " : "", h[j][d]);
			buf_puts(b, "}");
		}
	} else if (t->sparse) {
		buf_puts(b, ", 1");
	}
	bool mapped = false;
	for (int d = 0; d < t->nkey; d++)
		mapped |= map[d] > 0;
	if (mapped) {                   /* the site maps placing its dims */
		buf_puts(b, ", .map = ");
		int_list(b, t->nkey, map);
	}
	buf_puts(b, "};\n");
}

/* A filter's key predicate: the key dims that must be equal. */
void emit_pred(Emit *e, const KeyPred *p)
{
	buf_puts(e->b, "static int pred" HOLE "(const int64_t *k)\n{\n\treturn ");
	for (int j = 0; j < p->neq; j++)
		buf_printf(e->b, "%sk[%d] == k[%d]", j ? " && " : "", p->eq[j][0], p->eq[j][1]);
	if (p->neq == 0)
		buf_puts(e->b, "1");
	buf_puts(e->b, ";\n}\n\n");
}

/* ---- two-phase schedules ---- */

/* Op i's schedule as per-rank tables: the join groups each rank runs, in
 * increasing order (trt_twophase works out the messages from them). */
void emit_schedule(Emit *e, int i)
{
	Buf *b = e->b;
	const IaOp *op = &e->p->ops.v[i];
	const TpSched *ts = op->u.join.sched;
	static const char *aggs[] = {"TRT_AGG_ADD", "TRT_AGG_MAX", "TRT_AGG_MIN"};
	int64_t *n = xcalloc((size_t)ts->nranks + 1, sizeof *n);
	buf_printf(b, "/* a two-phase schedule, %" PRId64 " join groups on %d ranks (%s plan) */\n",
	           ts->njoin, ts->nranks, ts->variant);
	for (int r = 0; r < ts->nranks; r++) {
		buf_printf(b, "static const int64_t twophase" HOLE "_rank%d[] = {", r);
		for (int64_t j = 0; j < ts->njoin; j++) {
			if (ts->site[j] != r)
				continue;
			buf_printf(b, "%s%s%" PRId64, n[r] ? "," : "", n[r] % 16 ? " " : "\n\t", j);
			n[r]++;
		}
		buf_puts(b, n[r] ? "\n};\n" : "0};\n");
	}
	buf_puts(b, "static const int64_t *const twophase" HOLE "_jobs[] = {");
	for (int r = 0; r < ts->nranks; r++)
		buf_printf(b, "%stwophase" HOLE "_rank%d", r ? ", " : "", r);
	buf_puts(b, "};\nstatic const int64_t twophase" HOLE "_njobs[] = {");
	for (int r = 0; r < ts->nranks; r++)
		buf_printf(b, "%s%" PRId64, r ? ", " : "", n[r]);
	buf_printf(b, "};\nstatic const TrtTwoPhase twophase" HOLE " = {%d, %" PRId64 ", twophase" HOLE "_jobs, "
	           "twophase" HOLE "_njobs, %s};\n\n", ts->nranks, ts->njoin, aggs[op->u.join.kernel->red]);
	free(n);
}

/* ---- IST loops ---- */

/* In an IST body: the params it trains (those it loads), in tensor order. */
bool ist_param(const IaPlan *p, int t)
{
	for (int i = 0; i < p->ops.n; i++)
		if (p->ops.v[i].kind == IA_LOAD && p->ops.v[i].u.init.tensor == t)
			return true;
	return false;
}


/* The descriptor of IST loop `loop` of main_plan, whose body e->p is:
 * per param the body trains, the dims its split sizes cut (-1: none), its
 * type and placement in the body's plan; the split sizes, J and NB. */
void emit_ist_desc(Emit *e, int loop, const IaPlan *main_plan)
{
	Buf *b = e->b;
	const IaPlan *p = e->p;
	const IstLoop *l = &main_plan->tra->ist.v[loop];
	int np = 0;
	buf_puts(b, "static const TrtIstParam istparams" HOLE "[] = {\n");
	for (int i = 0; i < p->ops.n; i++) {
		const IaOp *op = &p->ops.v[i];
		int t = op->u.init.tensor;
		if (op->kind != IA_INIT || !ist_param(p, t))
			continue;
		const Tensor *ten = &p->tra->tensors.v[t];
		buf_printf(b, "\t{%d, {", e->tensor_index[t]);
		for (int d = 0; d < ten->rank; d++) {
			int z = -1;
			for (int k = 0; k < l->nsplit && ten->dimsize[d]; k++)
				if (!strcmp(l->split[k], ten->dimsize[d]))
					z = k;
			buf_printf(b, "%s%d", d ? ", " : "", z);
		}
		static const char *kinds[] = {"TRT_ALL", "TRT_PART", "TRT_ANY"};
		buf_printf(b, "%s}, &type%d, {%s, %d, {", ten->rank ? "" : "0", e->def[i][D_TYPE], kinds[op->place.kind],
		           op->place.ndims);
		buf_ints(b, op->place.ndims, op->place.dims, ", ");
		buf_puts(b, op->place.ndims ? "}}},\n" : "0}}},\n");
		np++;
	}
	if (!np)
		buf_puts(b, "\t{-1, {0}, NULL, {TRT_ALL, 0, {0}}},\n");
	buf_printf(b, "};\nstatic const TrtIst ist" HOLE " = {%d, %d, %d, {", loop, main_plan->nranks, l->nsplit);
	for (int k = 0; k < l->nsplit; k++) {
		buf_puts(b, k ? ", " : "");
		c_string(b, l->split[k]);
	}
	buf_puts(b, "}, {");
	for (int k = 0; k < l->nsplit; k++)
		buf_printf(b, "%s%" PRId64, k ? ", " : "", l->extent[k]);
	buf_printf(b, "}, %" PRId64 ", %" PRId64 ", %d, istparams" HOLE "};\n\n", l->every, l->count, np);
}
