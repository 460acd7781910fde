/* MPI objects beyond communicators: info, attributes with copy and
 * delete callbacks, names, inter-communicators, Comm_create_group,
 * Comm_split_type, error classes and handlers of the program, datatype
 * envelopes, group ranges. */
#include "check.h"
#include <string.h>

static int copies, deletes;
static int copy_fn(MPI_Comm c, int key, void *extra, void *in, void *out, int *flag) {
    (void)c; (void)key; (void)extra;
    copies++;
    *(void **)out = (void *)((char *)in + 1);
    *flag = 1;
    return MPI_SUCCESS;
}
static int delete_fn(MPI_Comm c, int key, void *val, void *extra) {
    (void)c; (void)key; (void)val;
    deletes++;
    *(int *)extra += 1;
    return MPI_SUCCESS;
}
static int handled;
static void handler(MPI_Comm *c, int *code, ...) {
    (void)c;
    handled = *code;
}

int main(int argc, char **argv) {
    /* Info objects work before MPI_Init (MPI 4.0). */
    MPI_Info info;
    CHECK_RC(MPI_Info_create(&info));
    MPI_Info_set(info, "b", "2");
    MPI_Info_set(info, "a", "1");
    MPI_Info_set(info, "b", "3");
    MPI_Init(&argc, &argv);
    int rank, n;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n);
    int nkeys, flag, len;
    char key[MPI_MAX_INFO_KEY + 1], val[MPI_MAX_INFO_VAL + 1];
    MPI_Info_get_nkeys(info, &nkeys);
    MPI_Info_get_nthkey(info, 0, key);
    MPI_Info_get(info, "b", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(nkeys == 2 && strcmp(key, "b") == 0 && flag && strcmp(val, "3") == 0, "info %d %s %s", nkeys, key, val);
    MPI_Info_get_valuelen(info, "a", &len, &flag);
    CHECK(flag && len == 1, "valuelen");
    MPI_Info dup;
    MPI_Info_dup(info, &dup);
    MPI_Info_delete(info, "b");
    MPI_Info_get(info, "b", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(!flag, "deleted key");
    MPI_Info_get(dup, "b", MPI_MAX_INFO_VAL, val, &flag);
    CHECK(flag && strcmp(val, "3") == 0, "dup is a copy");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    int rc = MPI_Info_delete(info, "nothing"), cls;
    MPI_Error_class(rc, &cls);
    CHECK(cls == MPI_ERR_INFO_NOKEY, "delete of a missing key: %d", cls);
    MPI_Info_free(&info);
    MPI_Info_free(&dup);
    CHECK(info == MPI_INFO_NULL, "free resets");

    /* Attributes: copy on dup, delete on free and on replacement. */
    int key_c, deleted = 0;
    CHECK_RC(MPI_Comm_create_keyval(copy_fn, delete_fn, &key_c, &deleted));
    static char base[4];
    MPI_Comm_set_attr(MPI_COMM_WORLD, key_c, base);
    MPI_Comm d;
    MPI_Comm_dup(MPI_COMM_WORLD, &d);
    void *got;
    MPI_Comm_get_attr(d, key_c, &got, &flag);
    CHECK(flag && got == base + 1 && copies == 1, "copied attribute");
    MPI_Comm_free(&d);
    CHECK(deletes == 1 && deleted == 1, "delete on free %d", deletes);
    MPI_Comm_set_attr(MPI_COMM_WORLD, key_c, base + 2);
    CHECK(deletes == 2, "replacing deletes the old value");
    MPI_Comm_delete_attr(MPI_COMM_WORLD, key_c);
    MPI_Comm_get_attr(MPI_COMM_WORLD, key_c, &got, &flag);
    CHECK(!flag && deletes == 3, "deleted attribute");
    MPI_Comm_free_keyval(&key_c);
    CHECK(key_c == MPI_KEYVAL_INVALID, "keyval reset");
    int *tag_ub;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
    CHECK(flag && *tag_ub >= 32767, "MPI_TAG_UB");
    int key_t;
    MPI_Type_create_keyval(MPI_TYPE_DUP_FN, MPI_TYPE_NULL_DELETE_FN, &key_t, NULL);
    MPI_Datatype t, t2;
    MPI_Type_contiguous(3, MPI_INT, &t);
    MPI_Type_set_attr(t, key_t, base);
    MPI_Type_dup(t, &t2);
    MPI_Type_get_attr(t2, key_t, &got, &flag);
    CHECK(flag && got == base, "type attribute duplicated");

    /* Names and envelopes. */
    char name[MPI_MAX_OBJECT_NAME];
    MPI_Comm_get_name(MPI_COMM_WORLD, name, &len);
    CHECK(strcmp(name, "MPI_COMM_WORLD") == 0, "world's name %s", name);
    MPI_Type_set_name(t, "three ints");
    MPI_Type_get_name(t, name, &len);
    CHECK(strcmp(name, "three ints") == 0 && len == 10, "type name");
    MPI_Type_get_name(MPI_DOUBLE, name, &len);
    CHECK(strcmp(name, "MPI_DOUBLE") == 0, "predefined type name %s", name);
    int ni, na, nt, comb, ints[1];
    MPI_Aint aints[1];
    MPI_Datatype types[1];
    MPI_Type_get_envelope(t, &ni, &na, &nt, &comb);
    CHECK(comb == MPI_COMBINER_CONTIGUOUS && ni == 1 && na == 0 && nt == 1, "envelope");
    MPI_Type_get_contents(t, 1, 0, 1, ints, aints, types);
    CHECK(ints[0] == 3 && types[0] == MPI_INT, "contents");
    MPI_Type_get_envelope(MPI_INT, &ni, &na, &nt, &comb);
    CHECK(comb == MPI_COMBINER_NAMED, "named");
    MPI_Type_free(&t);
    MPI_Type_free(&t2);
    MPI_Type_free_keyval(&key_t);

    /* Error classes and a handler of the program's. */
    int myclass, mycode;
    MPI_Add_error_class(&myclass);
    MPI_Add_error_code(myclass, &mycode);
    MPI_Add_error_string(mycode, "my own error");
    char text[MPI_MAX_ERROR_STRING];
    MPI_Error_string(mycode, text, &len);
    MPI_Error_class(mycode, &cls);
    CHECK(strcmp(text, "my own error") == 0 && cls == myclass, "added error %s %d", text, cls);
    int *last;
    MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_LASTUSEDCODE, &last, &flag);
    CHECK(flag && *last >= mycode, "MPI_LASTUSEDCODE");
    MPI_Errhandler eh;
    MPI_Comm_create_errhandler(handler, &eh);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, eh);
    MPI_Comm_call_errhandler(MPI_COMM_WORLD, mycode);
    CHECK(handled == mycode, "handler called with %d", handled);
    handled = 0;
    MPI_Send(NULL, 0, MPI_INT, n + 5, 0, MPI_COMM_WORLD);
    CHECK(handled != 0, "handler called on a real error");
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_ARE_FATAL);
    MPI_Errhandler_free(&eh);

    /* The tool interface: present, and empty. */
    int provided, num;
    CHECK(MPI_T_cvar_get_num(&num) == MPI_T_ERR_NOT_INITIALIZED, "MPI_T before init");
    CHECK_RC(MPI_T_init_thread(MPI_THREAD_SINGLE, &provided));
    MPI_T_cvar_get_num(&num);
    CHECK(num == 0, "no control variables");
    MPI_T_pvar_get_num(&num);
    CHECK(num == 0, "no performance variables");
    char tname[64];
    int tlen = sizeof tname, verb, bind, scope;
    MPI_Datatype tdt;
    MPI_T_enum ten;
    CHECK(MPI_T_cvar_get_info(0, tname, &tlen, &verb, &tdt, &ten, NULL, NULL, &bind, &scope) == MPI_T_ERR_INVALID_INDEX, "cvar index 0");
    CHECK_RC(MPI_T_finalize());

    /* Group ranges: the even ranks, then the odd ones. */
    MPI_Group world, evens, odds;
    MPI_Comm_group(MPI_COMM_WORLD, &world);
    int range[1][3] = {{0, n - 1, 2}};
    MPI_Group_range_incl(world, 1, range, &evens);
    MPI_Group_range_excl(world, 1, range, &odds);
    int ge, go;
    MPI_Group_size(evens, &ge);
    MPI_Group_size(odds, &go);
    CHECK(ge == (n + 1) / 2 && go == n / 2, "ranges %d %d", ge, go);

    /* Comm_create_group by the evens only; split_type: one host here. */
    if (rank % 2 == 0) {
        MPI_Comm ec;
        CHECK_RC(MPI_Comm_create_group(MPI_COMM_WORLD, evens, 7, &ec));
        int s, one = 1;
        MPI_Allreduce(&one, &s, 1, MPI_INT, MPI_SUM, ec);
        CHECK(s == ge, "create_group allreduce %d", s);
        MPI_Comm_free(&ec);
    }
    MPI_Comm node;
    CHECK_RC(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &node));
    int nn;
    MPI_Comm_size(node, &nn);
    CHECK(nn == n, "one host: split_type gives all %d ranks (%d)", n, nn);
    MPI_Comm_free(&node);

    /* Inter-communicator between the evens and the odds. */
    if (n > 1) {
        MPI_Comm half, inter, merged;
        MPI_Comm_split(MPI_COMM_WORLD, rank % 2, rank, &half);
        CHECK_RC(MPI_Intercomm_create(half, 0, MPI_COMM_WORLD, rank % 2 == 0 ? 1 : 0, 99, &inter));
        int is, rsize, lsize;
        MPI_Comm_test_inter(inter, &is);
        MPI_Comm_remote_size(inter, &rsize);
        MPI_Comm_size(inter, &lsize);
        CHECK(is && rsize == (rank % 2 ? ge : go) && lsize == (rank % 2 ? go : ge), "inter sizes");
        /* Point-to-point: local rank 0 of each side swaps with the other's 0. */
        int lr;
        MPI_Comm_rank(inter, &lr);
        if (lr == 0) {
            int mine = rank, theirs = -1;
            MPI_Sendrecv(&mine, 1, MPI_INT, 0, 1, &theirs, 1, MPI_INT, 0, 1, inter, MPI_STATUS_IGNORE);
            CHECK(theirs == (rank == 0 ? 1 : 0), "inter p2p %d", theirs);
        }
        CHECK_RC(MPI_Intercomm_merge(inter, rank % 2, &merged));
        int mr;
        MPI_Comm_rank(merged, &mr);
        /* Evens (high = 0) first, in their order, then the odds. */
        CHECK(mr == (rank % 2 == 0 ? rank / 2 : ge + rank / 2), "merged rank %d", mr);
        MPI_Comm_free(&merged);
        MPI_Comm_free(&inter);
        MPI_Comm_free(&half);
    }
    MPI_Group_free(&evens);
    MPI_Group_free(&odds);
    MPI_Group_free(&world);
    pass("objects");
    MPI_Finalize();
    return 0;
}
