// dockerfile-check parses a Dockerfile with BuildKit's own parser (the one
// `docker build` uses), so syntax errors, unknown instructions or flags,
// unterminated heredocs, malformed RUN --mount options, references to
// undefined stages and BuildKit's lint warnings fail without a Docker engine.
// It prints the stages as JSON: [{"name", "base", "commands": ["COPY ...", ...],
// "files": {"<destination>": "<heredoc content>"}}].
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/moby/buildkit/frontend/dockerfile/instructions"
	"github.com/moby/buildkit/frontend/dockerfile/linter"
	"github.com/moby/buildkit/frontend/dockerfile/parser"
)

type stage struct {
	Name     string            `json:"name"`
	Base     string            `json:"base"`
	Commands []string          `json:"commands"`
	Files    map[string]string `json:"files"`
}

type expandable interface {
	Expand(expander instructions.SingleWordExpander) error
}

func main() {
	if len(os.Args) != 2 {
		fail("usage: dockerfile-check <Dockerfile>")
	}
	file, err := os.Open(os.Args[1])
	if err != nil {
		fail(err.Error())
	}
	defer file.Close()

	result, err := parser.Parse(file)
	if err != nil {
		fail("parse: " + err.Error())
	}
	var problems []string
	for _, warning := range result.Warnings {
		problems = append(problems, fmt.Sprintf("line %d: %s", warning.Location.Start.Line, warning.Short))
	}
	lint := linter.New(&linter.Config{Warn: func(rule, _, _, message string, location []parser.Range) {
		line := 0
		if len(location) > 0 {
			line = location[0].Start.Line
		}
		problems = append(problems, fmt.Sprintf("line %d: %s: %s", line, rule, message))
	}})
	stages, _, err := instructions.Parse(result.AST, lint)
	if err != nil {
		fail(err.Error())
	}

	known := map[string]bool{}
	identity := func(word string) (string, error) { return word, nil }
	var out []stage
	for index, s := range stages {
		summary := stage{Name: s.Name, Base: s.BaseName, Files: map[string]string{}}
		for _, command := range s.Commands {
			line := command.Location()[0].Start.Line
			if e, ok := command.(expandable); ok {
				if err := e.Expand(identity); err != nil {
					problems = append(problems, fmt.Sprintf("line %d: %s", line, err))
				}
			}
			if run, ok := command.(*instructions.RunCommand); ok {
				for _, mount := range instructions.GetMounts(run) {
					switch mount.Type {
					case instructions.MountTypeBind, instructions.MountTypeCache, instructions.MountTypeTmpfs,
						instructions.MountTypeSecret, instructions.MountTypeSSH:
					default:
						problems = append(problems, fmt.Sprintf("line %d: unknown RUN --mount type %q", line, mount.Type))
					}
				}
			}
			if c, ok := command.(*instructions.CopyCommand); ok {
				if c.From != "" && !known[strings.ToLower(c.From)] && !isImage(c.From) {
					problems = append(problems, fmt.Sprintf("line %d: COPY --from=%s names no earlier stage", line, c.From))
				}
				for _, content := range c.SourceContents {
					summary.Files[c.DestPath] += content.Data
				}
			}
			summary.Commands = append(summary.Commands, fmt.Sprint(command))
		}
		known[strings.ToLower(s.Name)] = s.Name != ""
		known[fmt.Sprint(index)] = true
		out = append(out, summary)
	}
	if len(problems) > 0 {
		fail(strings.Join(problems, "\n"))
	}
	encoder := json.NewEncoder(os.Stdout)
	encoder.SetIndent("", "  ")
	if err := encoder.Encode(out); err != nil {
		fail(err.Error())
	}
}

// An image reference has a registry path or a tag; a bare word must be a stage.
func isImage(reference string) bool {
	return strings.ContainsAny(reference, "/:@")
}

func fail(message string) {
	fmt.Fprintln(os.Stderr, message)
	os.Exit(1)
}
