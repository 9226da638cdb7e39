#!/bin/bash
# sbx image build: a two-stage project on a busybox image made here (tests/helpers/mkimage.py):
# ARG before FROM, ENV, WORKDIR, USER, ENTRYPOINT, CMD, LABEL, EXPOSE in the result's config;
# RUN in a sandbox whose changes become a layer; COPY from the context (.dockerignore, globs,
# --chown by number and by name (the passwd and group of the layers so far), --chmod, a
# symbolic link copied as a link and never followed) and COPY --from (paths and patterns);
# ADD of a local tar; the layer cache (a rebuild makes no sandbox; a changed source misses
# from its step on; --no-cache); --target; a failing RUN (125, its line, no image, no
# sandbox left); a COPY source outside the context refused; leftovers of a killed build swept.
# shellcheck disable=SC2016,SC2317,SC2034 # lib.sh evals the single-quoted bodies, which use
# the variables set here
# shellcheck source=tests/lib.sh
. "$(dirname "$0")/lib.sh"
test_skip_unless USERNS python3

MKIMAGE=("$TEST_PYTHON" "$TEST_DIR/helpers/mkimage.py")
# other users than root exist inside only when sbx runs as root (else only uid 0 is mapped)
if [ "$(id -u)" -eq 0 ]; then RUNAS=1000; else RUNAS=0; fi
SECRET="host-secret-$$-$RANDOM"
P=$TRASH/proj

# config_of IMAGE: the image's config blob, pretty (sorted keys)
config_of() {
	"$TEST_PYTHON" - "$SBX_HOME" "$1" <<-\EOF
	import json, sys
	home, name = sys.argv[1], sys.argv[2]
	refs = json.load(open(home + "/images/refs.json"))
	full = name if "/" in name else "docker.io/library/" + name
	cfg = refs[full]["config"]
	print(json.dumps(json.load(open(home + "/images/blobs/sha256/" + cfg[7:])), indent=1,
	                 sort_keys=True))
	EOF
}

# top_layer IMAGE [N]: "NAME TYPE MODE UID GID LINK" per entry of the image's top layer (or
# of the Nth from the top: 1 is the top)
top_layer() {
	"$TEST_PYTHON" - "$SBX_HOME" "$1" "${2:-1}" <<-\EOF
	import json, sys, tarfile
	home, name, nth = sys.argv[1], sys.argv[2], int(sys.argv[3])
	refs = json.load(open(home + "/images/refs.json"))
	full = name if "/" in name else "docker.io/library/" + name
	t = tarfile.open(home + "/images/blobs/sha256/" + refs[full]["layers"][-nth][7:])
	ty = {tarfile.REGTYPE: "f", tarfile.DIRTYPE: "d", tarfile.SYMTYPE: "l"}
	for m in t.getmembers():
	    print(m.name, ty.get(m.type, "?"), "%o" % m.mode, m.uid, m.gid, m.linkname or "-")
	EOF
}

rm_boxes() { sbx rm -f box tbox >/dev/null 2>&1 || :; }
test_atexit rm_boxes

test_expect_success 'set-up: a busybox image, a project with two stages' '
	"${MKIMAGE[@]}" --out base.tar --format docker-archive --name base:1 \
		--preset busybox >/dev/null &&
	sbx image import base.tar >/dev/null &&
	printf "%s\n" "$SECRET" >secret &&
	mkdir -p "$P/src/sub" "$P/data" && cd "$P" &&
	echo hello >src/a.txt && echo sub >src/sub/b.txt && echo noise >src/debug.log &&
	echo kept >src/keep.log && echo tmp >data/x.tmp && echo one >data/one.txt &&
	ln -s "$TRASH/secret" src/outside && ln -s a.txt src/inside &&
	printf "%s\n" "# comment" "*/*.log" "!src/keep.log" "data/*.tmp" >.dockerignore &&
	mkdir tarsrc && echo from-tar >tarsrc/t.txt && tar -C tarsrc -czf files.tgz t.txt &&
	cat >Dockerfile <<-EOF
	# syntax=docker/dockerfile:1
	ARG BASE=base:1 GREETING=hi
	FROM \$BASE AS build
	ARG GREETING
	ENV APP=/app \\
	    MODE=prod
	WORKDIR \${APP}
	COPY src/ ./src/
	COPY --chown=$RUNAS:$RUNAS --chmod=0640 data/*.txt /data/
	ADD files.tgz /opt/
	RUN echo "\$GREETING from \$MODE" >built.txt && \\
	    cat src/a.txt >>built.txt
	FROM \${BASE:-none}
	ARG GREETING
	ENV GREETING=\${GREETING:+say-\$GREETING}
	ARG FROMSTAGE=build
	COPY --from=\$FROMSTAGE /app/built.txt /out/
	COPY --from=build /app/src /srccopy
	LABEL org.example.v="1.0" other=two
	EXPOSE 8080/tcp
	WORKDIR /work
	USER $RUNAS
	ENTRYPOINT ["/bin/cat"]
	CMD ["/out/built.txt"]
	EOF
	cd "$TRASH" && sbx image build -t proj:1 "$P" >id 2>log &&
	test_match "^sha256:[0-9a-f]{64}$" "$(cat id)" &&
	test_grep "^#1 FROM \$BASE AS build" log && test_grep "^#8 RUN echo" log &&
	test_eq "" "$(sbx ls -q)"
'

test_expect_success 'the image runs: RUN output, COPY --from, ENTRYPOINT and CMD' '
	test_eq "hi from prod
hello" "$(sbx run --image proj:1)" &&
	sbx image ls | test_grep -E "^proj +1 .* built$"
'

test_expect_success 'ENV, ARG, WORKDIR, USER, LABEL, EXPOSE in the config' '
	rm_boxes &&
	config_of proj:1 >cfg &&
	test_grep "\"GREETING=say-hi\"" cfg &&
	test_grep "\"WorkingDir\": \"/work\"" cfg && test_grep "\"User\": \"$RUNAS\"" cfg &&
	test_grep "\"org.example.v\": \"1.0\"" cfg && test_grep "\"other\": \"two\"" cfg &&
	test_grep "\"8080/tcp\"" cfg && test_grep -A2 "\"Entrypoint\"" cfg &&
	sbx create --name box --image proj:1 >/dev/null &&
	test_eq "/work" "$(sbx exec box pwd)" &&
	test_eq "$RUNAS" "$(sbx exec box id -u)" &&
	test_eq "say-hi" "$(sbx exec box sh -c "echo \$GREETING")"
'

test_expect_success '.dockerignore, globs, directories by their contents, ADD of a tar' '
	rm_boxes &&
	sbx create --name box --image proj:1 >/dev/null &&
	sbx exec -u 0 box ls /srccopy | sort >got &&
	printf "%s\n" a.txt inside keep.log outside sub >want && test_file_eq want got &&
	test_eq "sub" "$(sbx exec box cat /srccopy/sub/b.txt)" &&
	sbx rm -f box >/dev/null &&
	sbx image build -q --target build -t proj:stage1 "$P" >/dev/null &&
	sbx create --name box --image proj:stage1 >/dev/null &&
	test_eq "one.txt" "$(sbx exec box ls /data)" &&
	test_eq "from-tar" "$(sbx exec box cat /opt/t.txt)" &&
	expect_code 1 sbx exec box test -e /out &&
	test_eq "/app prod" "$(sbx exec box sh -c "echo \$APP \$MODE")" &&
	sbx rm -f box >/dev/null
'

test_expect_success 'COPY --chown and --chmod: the layer says so' '
	sbx image build -q -f - -t proj:chown "$P" >/dev/null <<-EOF &&
	FROM base:1
	COPY --chown=$RUNAS:$RUNAS --chmod=0640 data/one.txt /d/
	EOF
	top_layer proj:chown >layer &&
	test_grep "^d/one.txt f 640 $RUNAS $RUNAS -" layer && test_grep ! "^d " layer
'

test_expect_success 'COPY --chown by name: the image'"'"'s passwd and group, as its layers so far have them' '
	sbx image build -q -f - -t proj:names "$P" >/dev/null <<-EOF &&
	FROM base:1
	COPY --chown=app:nogroup data/one.txt /n/a
	COPY --chown=app data/one.txt /n/b
	RUN echo "svc:x:1234:1234::/:/bin/sh" >>/etc/passwd && echo "svcs:x:4321:" >>/etc/group
	COPY --chown=svc:svcs data/one.txt /n/c
	COPY --chown=7:root data/one.txt /n/d
	EOF
	for i in 5 4 2 1; do top_layer proj:names "$i" | grep "^n/. f" || exit 1; done >ids &&
	test_eq "n/a f 644 1000 65534 -|n/b f 644 1000 1000 -|n/c f 644 1234 4321 -|n/d f 644 7 0 -" \
		"$(paste -sd "|" ids)" &&
	expect_code 125 sbx image build -q -f - -t proj:nouser "$P" >/dev/null 2>err <<-EOF &&
	FROM base:1
	COPY --chown=nosuch data/one.txt /n/a
	EOF
	test_grep "Dockerfile:2: COPY --chown=nosuch: no user .nosuch. in the image.s /etc/passwd" err &&
	expect_code 125 sbx image build -q -f - -t proj:nogroup "$P" >/dev/null 2>err <<-EOF &&
	FROM base:1
	COPY --chown=app:nosuch data/one.txt /n/a
	EOF
	test_grep "no group .nosuch. in the image.s /etc/group" err
'

test_expect_success 'COPY --from a pattern: what it matches in the stage, into a directory' '
	sbx image build -q -f - -t proj:fromglob "$P" >/dev/null <<-EOF &&
	FROM base:1 AS a
	RUN mkdir -p /o/sub /o/sub2 && echo 1 >/o/x.txt && echo 2 >/o/y.txt && echo 3 >/o/z.log && \
	    echo 4 >/o/sub/w.txt && echo 5 >/o/sub2/v.txt
	FROM base:1
	COPY --from=a /o/*.txt /dst/
	COPY --from=a /o/sub* /dst2/
	COPY --from=a /o/s*/?.txt /dst3/
	EOF
	sbx run --image proj:fromglob -- sh -c "cd / && ls dst dst2 dst3" >got &&
	test_eq "dst:|x.txt|y.txt||dst2:|v.txt|w.txt||dst3:|v.txt|w.txt" "$(paste -sd "|" got)" &&
	expect_code 125 sbx image build -q -f - -t proj:fromnone "$P" >/dev/null 2>err <<-EOF &&
	FROM base:1 AS a
	RUN mkdir /o
	FROM base:1
	COPY --from=a /o/*.nope /dst/
	EOF
	test_grep "Dockerfile:4: COPY: COPY --from: ./o/\*.nope. matches nothing" err
'

test_expect_success 'a context link pointing outside is copied as a link, never followed' '
	rm_boxes &&
	test_eq "$SECRET" "$(cat "$P/src/outside")" &&
	sbx create --name box --image proj:1 >/dev/null &&
	test_eq "$TRASH/secret" "$(sbx exec box readlink /srccopy/outside)" &&
	test_eq "hello" "$(sbx exec box cat /srccopy/inside)" &&
	sbx exec box sh -c "cat /srccopy/outside 2>&1 || :" >out &&
	test_grep ! "$SECRET" out &&
	sbx image build -q -f - -t proj:link "$P" >/dev/null <<-EOF &&
	FROM base:1
	COPY src/outside /l
	EOF
	top_layer proj:link >layer && test_grep "^l l 777 0 0 $TRASH/secret" layer &&
	sbx rm -f box >/dev/null
'

test_expect_success 'a rebuild hits the cache: every step CACHED, no sandbox made' '
	sbx --debug image build -t proj:1 "$P" >id2 2>log &&
	test_file_eq id id2 &&
	test_eq "$(grep -v CACHED log | grep -c "^#[0-9]* [A-Z]")" \
		"$(($(grep -c "^#[0-9]* CACHED" log) + 2))" &&
	test_grep ! "claimed id" log
'

test_expect_success 'a changed COPY source misses from its step on' '
	echo changed >"$P/src/a.txt" &&
	sbx --debug image build -t proj:1 "$P" >id3 2>log &&
	test_grep "^#4 CACHED" log && test_grep "^#5 COPY src/" log && test_grep ! "^#5 CACHED" log &&
	test_grep ! "^#8 CACHED" log && test_grep "claimed id" log &&
	test_eq "hi from prod
changed" "$(sbx run --image proj:1)"
'

test_expect_success '--no-cache runs every step; --build-arg overrides a default' '
	sbx image build --no-cache --build-arg GREETING=hey -t proj:2 "$P" >/dev/null 2>log &&
	test_grep ! "CACHED" log &&
	test_eq "hey from prod
changed" "$(sbx run --image proj:2)"
'

test_expect_success 'a failing RUN: 125, its line, its output, no image, no sandbox left' '
	rm_boxes &&
	mkdir -p fail && cat >fail/Dockerfile <<-\EOF &&
	FROM base:1
	RUN echo before >/b

	RUN echo to-stdout && \
	    echo to-stderr >&2 && exit 3
	EOF
	expect_code 125 sbx image build -t bad:1 fail >out 2>err &&
	test_eq "" "$(cat out)" &&
	test_grep "to-stdout" err && test_grep "to-stderr" err &&
	test_grep "^sbx: error: Dockerfile:4: RUN echo to-stdout .* failed with exit status 3$" err &&
	expect_code 125 sbx image build -q -t bad:1 fail >out 2>err &&
	test_grep "to-stderr" err &&
	sbx image ls >ls && test_grep ! "^bad " ls &&
	test_eq "" "$(sbx ls -q)"
'

test_expect_success 'COPY from outside the context is refused (control: inside works)' '
	mkdir -p esc && echo inside >esc/ok && cat >esc/Dockerfile <<-\EOF &&
	FROM base:1
	COPY ../secret /s
	EOF
	expect_code 125 sbx image build -t esc:1 esc 2>err &&
	test_grep "Dockerfile:2: .*outside the build context" err &&
	printf "FROM base:1\nCOPY ok /s\n" >esc/Dockerfile &&
	sbx image build -q -t esc:1 esc >/dev/null
'

test_expect_success 'bad input: no FROM, an unknown instruction, a bad flag, HEALTHCHECK' '
	mkdir -p bad &&
	printf "RUN true\n" >bad/Dockerfile &&
	expect_code 125 sbx image build -t x:1 bad 2>err && test_grep "before the first FROM" err &&
	printf "FROM base:1\nFROB x\n" >bad/Dockerfile &&
	expect_code 125 sbx image build -t x:1 bad 2>err &&
	test_grep "Dockerfile:2: FROB: unknown instruction" err &&
	printf "FROM base:1\nCOPY --frob=1 a /b\n" >bad/Dockerfile &&
	expect_code 125 sbx image build -t x:1 bad 2>err && test_grep "frob" err &&
	printf "FROM base:1\nHEALTHCHECK CMD true\n" >bad/Dockerfile &&
	expect_code 125 sbx image build -t x:1 bad 2>err && test_grep "HEALTHCHECK" err &&
	expect_code 125 sbx image build -t x:1 bad --target nope 2>err &&
	expect_code 125 sbx image build --net bogus -t x:1 bad 2>err && test_grep "net" err &&
	printf "FROM scratch\nRUN true\n" >bad/Dockerfile &&
	expect_code 125 sbx image build -t x:1 bad 2>err && test_grep "FROM scratch" err &&
	expect_code 125 sbx image build bad 2>err && test_grep "\-t NAME" err
'

test_expect_success 'FROM scratch; --net none for RUN; -f - and --build-arg in FROM' '
	mkdir -p scr && echo data >scr/ok && cp "$P/files.tgz" scr/ &&
	printf "FROM scratch\nADD files.tgz /t\nCOPY ok /ok\nCMD [\"/ok\"]\n" >scr/Dockerfile &&
	sbx image build -q -t scr:1 scr >/dev/null &&
	top_layer scr:1 >layer && test_grep "^ok f 644 0 0 -" layer &&
	printf "FROM scratch\nADD files.tgz /t\n" | sbx image build -q -f - -t scr:2 scr >/dev/null &&
	top_layer scr:2 >layer && test_grep "^t/t.txt f " layer &&
	config_of scr:1 >cfg && test_grep "\"/ok\"" cfg &&
	printf "ARG B=none\nFROM \$B\nRUN echo ran >/ran\n" |
		sbx image build -q --net none --build-arg B=base:1 -f - -t net:1 scr >/dev/null &&
	test_eq "ran" "$(sbx run --image net:1 -- cat /ran)"
'

test_expect_success 'RUN under --net allow=: what it was refused is in the build output' '
	printf "FROM base:1\nRUN wget -q -O- http://blocked.example/ || echo refused\n" |
		sbx image build --net allow=ok.example -f - -t eg:1 scr >out 2>err &&
	test_grep "^refused" err &&
	test_grep "^#2 egress: deny blocked.example:80 " err
'

test_expect_success 'a killed build leaves nothing a later one does not sweep' '
	rm_boxes &&
	mkdir -p slow && printf "FROM base:1\nRUN sleep 60\n" >slow/Dockerfile &&
	{ "$SBX" image build --no-cache -t slow:1 slow >/dev/null 2>&1 & } &&
	pid=$! &&
	wait_until 20 sh -c "test -n \"\$(\"$SBX\" ls -q)\"" &&
	kill -KILL "$pid" && wait "$pid" 2>/dev/null; :
	test -n "$(sbx ls -q)" &&
	sbx image prune >/dev/null &&
	test_eq "" "$(sbx ls -q)" &&
	sbx image ls >ls && test_grep ! "^slow " ls && test_grep ! "<none>" ls
'

test_done
